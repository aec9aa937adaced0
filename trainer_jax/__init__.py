"""The thin JAX Mixture-of-Experts trainer: one planner `RunConfig` in, one finished run out."""
