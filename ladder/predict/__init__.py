"""Predictions: the adapter from a ladder in the store to the prediction core in `fits` (`adapter`), the
`Prediction` it makes, scoring against a run, training dynamics projected to the hero, and re-planning."""
