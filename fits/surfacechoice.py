"""The surface's form chosen by a backtest on the runs themselves, and a band no narrower than it saw.

Two forms of L(N, D) = E + A/N^α + B/D^β can predict a larger run: α and β free, or one exponent
for both (α = β). With few model sizes the free form trades α against E, and which form carries
to a larger size is not something a fit's residuals say. So each form is backtested on the runs:
the largest size is held out and predicted from the smaller ones (and, with five sizes or more,
the two largest from the rest), and the form with the lower mean |error| over the held-out runs
predicts (ties keep the free form). Sizes within 1% count as one.

An isoFLOP sweep (runs given with their compute budgets, or whose tokens trace them: `fits.isoflop.inferred_budgets`;
three budgets or more of three sizes or more) is backtested by budget instead: the largest budget (and with five budgets or more the two largest) is held out
and predicted from the smaller ones, the question a sweep is run to answer. Holding out its largest model
sizes, the least-trained runs of each budget, would score the forms where they all do well. Its valleys (the
loss across sizes at one budget) also pin a third form, E + (A/N^α + B/D^β)^γ (`fits.surface`, kaplan=True),
whose valleys' curvature is not tied to how fast the budgets' least losses fall: it joins the candidates there.

The band: the chosen form's own band (Student-t or bootstrap, which hold the runs' own scatter),
widened in quadrature by the backtest's error beyond that scatter, per e-fold of extrapolation,
carried to the target's distance (the 90% level), and to at least `fits.predictor.UNTESTED_ERROR`
per e-fold (one sd), as the curve predictor does; then, as the curve predictor does across its laws,
so that its 90% band holds the other form's prediction (the spread across forms: where two forms
that fit the runs disagree at the target, the runs do not say which is right), and the prediction scaled
to the least loss a power law through the runs' lower envelope gives at the target's compute
(`fits.frontier`: where the surface's own least loss at that compute parts from it, the runs do not say
which frontier holds).
The distance of a run from a fit, in e-folds: how far the nearest fitted run would have to grow, in
N and in D alike, to be at least as large in both (0 where some fitted run is: the runs' losses then
bracket the target's); or, where larger, its tokens per parameter over the most any fitted run trained.
A run of more compute than any fitted one is an extrapolation even when its N and its D/N each lie
inside the fitted ranges (the largest budget of an isoFLOP sweep, from the smaller budgets).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fits import checks, isoflop
from fits.backtest import holdouts
from fits.endpoint import EndpointFit
from fits.errors import FitError
from fits.frontier import envelope_law, scaled_by_envelope
from fits.predictor import UNTESTED_ERROR, floor_sd, spread_sd
from fits.runs import ONE_RATIO
from fits.surface import SurfaceFit, fit_surface
from fits.uncertainty import Band

FORMS = ("free", "shared")
"""free: α and β fitted apart; shared: one exponent for N and D (α = β)."""
FORM_TEXT = {"free": "α and β fitted apart, as Hoffmann et al. and Epoch AI's replication fit them",
             "shared": "one exponent for N and D", "kaplan": "E + (A/N^α + B/D^β)^γ"}
"""Each form as the summary names it beside the one chosen."""
SWEEP_FORMS = FORMS + ("kaplan",)
"""The candidates where the runs give their compute budgets; kaplan: E + (A/N^α + B/D^β)^γ."""
MIN_SWEPT_BUDGETS = 3
"""Budgets of `fits.isoflop.SWEEP_SIZES` sizes or more that make runs a sweep: a backtest by budget holds out the
largest and still fits valleys at two or more."""


def sweep_budgets(N: np.ndarray, budget, tokens=None) -> np.ndarray | None:
    """Each run's compute `budget` as an array, where the runs are an isoFLOP sweep (`MIN_SWEPT_BUDGETS` budgets
    or more that trace valleys); None where they trace too few valleys. Where no budgets are given, those the
    runs' `tokens` trace (`fits.isoflop.inferred_budgets`), if any."""
    if budget is None:
        return None if tokens is None else isoflop.inferred_budgets(N, tokens, MIN_SWEPT_BUDGETS)
    budget = checks.as_array("budget", budget)
    checks.same_length(n_params=N, budget=budget)
    return budget if isoflop.swept_budgets(budget, N) >= MIN_SWEPT_BUDGETS else None


def traced(budget: np.ndarray) -> str:
    """What a user is told of budgets inferred from the runs' tokens."""
    return (f"the runs are an isoFLOP sweep of {np.unique(budget).size} budgets that their tokens trace (at each, D "
            "falls as N grows; 6·N·D names each budget)")


def fit_form(N, D, L, form: str, E: float | None = None, names=None) -> SurfaceFit:
    """The surface in one of the `SWEEP_FORMS` (`names`: the runs', for its warnings)."""
    return fit_surface(N, D, L, E=E, shared_exponent=form == "shared", kaplan=form == "kaplan", names=names)


@dataclass(frozen=True)
class FormTrial:
    """One form predicting one held-out set of sizes."""

    form: str
    held_out: tuple[float, ...]
    """The held-out model sizes (N), or compute budgets where `by` is "budget"."""
    distance: float
    """How far the held-out runs reach beyond the fitted ones (e-folds; the farthest held-out run, as
    the curve predictor counts a backtest's distance)."""
    errors: np.ndarray
    """predicted / actual − 1, one per held-out run."""
    scatter: float = 0.0
    """The fitted runs' scatter around the law (log residual sd): the part of a held-out run's error
    that is its own noise, which extrapolating further does not grow."""
    failed: str = ""
    by: str = "size"
    """What was held out: the largest model sizes, or the largest compute budgets of a sweep."""

    @property
    def mean_abs(self) -> float:
        return float(np.mean(np.abs(self.errors))) if self.errors.size and not self.failed else np.inf

    @property
    def per_efold(self) -> float:
        """RMS error per e-fold of extrapolation, beyond the runs' own scatter:
        sqrt(max(mean error² − scatter², 0)) / distance."""
        if self.failed or not self.errors.size:
            return 0.0
        excess = max(float(np.mean(self.errors**2)) - self.scatter**2, 0.0)
        return float(np.sqrt(excess) / max(self.distance, 1e-9))

    def record(self) -> dict:
        ok = self.errors.size and not self.failed
        return {"form": self.form, f"held_out_{self.by}s": [float(n) for n in self.held_out], "runs": int(self.errors.size),
                "mean_error": float(np.mean(self.errors)) if ok else None,
                "mean_abs_error": self.mean_abs if ok else None,
                "distance_efolds": self.distance, "failed": self.failed}


def _scored(trials, form: str) -> bool:
    """Whether a backtest trial scored `form` (it was fitted without the held-out runs and predicted them)."""
    return any(t.form == form and not t.failed for t in trials)


@dataclass(frozen=True)
class SurfaceChoice:
    form: str
    fit: SurfaceFit
    why: str
    trials: tuple[FormTrial, ...] = ()
    fitted: tuple[np.ndarray, np.ndarray] = (np.ones(1), np.ones(1))
    """The fitted runs' (N, D): where `distance` measures from."""
    warnings: tuple[str, ...] = field(default=())
    others: tuple[SurfaceFit, ...] = ()
    """The other forms fitted on the same runs: their predictions set the spread across forms."""
    envelope: EndpointFit | None = None
    """The least loss at each compute through the runs' lower envelope (`fits.frontier.envelope_law`); None
    where fewer than three computes lie on it."""
    envelope_runs: int = 0
    budgets: np.ndarray | None = None
    """Each fitted run's compute budget where the runs are an isoFLOP sweep (given, or traced by their tokens)."""
    traced: bool = False
    """Whether `budgets` were read from the runs' tokens (`fits.isoflop.inferred_budgets`)."""

    @property
    def tested(self) -> bool:
        """Whether a backtest scored the chosen form (its error then sets the bands' widening, not the floor alone)."""
        return _scored(self.trials, self.form)

    def budget_record(self) -> dict | None:
        """The sweep's budgets, for JSON and the summary: where they came from, and each one's runs and sizes."""
        if self.budgets is None:
            return None
        N, label = self.fitted[0], isoflop.budgets(self.budgets)
        rows = [{"budget": float(np.median(self.budgets[label == b])), "runs": int(np.sum(label == b)),
                 "sizes": int(np.unique(size_classes(N[label == b])).size)} for b in np.unique(label)]
        return {"traced": self.traced, "budgets": rows}

    def scores(self) -> dict[str, float]:
        return _scores(self.trials)

    def per_efold(self) -> float:
        """The chosen form's largest backtest RMS error per e-fold (0 without a backtest)."""
        return max((t.per_efold for t in self.trials if t.form == self.form), default=0.0)

    def distance(self, n_params, tokens) -> np.ndarray:
        return distance(n_params, tokens, *self.fitted)

    def sd(self, median, n_params, tokens) -> np.ndarray:
        """One standard deviation (absolute) the band adds: the backtest's error carried (or the untested
        floor) and the spread across forms (the other forms' and the envelope's distance from `median` at the
        90% level), in quadrature."""
        d = self.distance(n_params, tokens)
        alternatives = [other.predict(n_params, tokens) for other in self.others]
        alternatives.append(scaled_by_envelope(self.fit, self.envelope, n_params, tokens))
        spread = spread_sd(median, alternatives)
        return np.hypot(floor_sd(median, self.per_efold() * d, d), spread)

    def band(self, n_params, tokens, ensemble=None) -> Band:
        """The chosen fit's band (`SurfaceFit.band`) with the backtest's carried error added to each part."""
        sd = self.sd(self.fit.predict(n_params, tokens), n_params, tokens)
        return self.fit.band(n_params, tokens, ensemble, extra_sd=sd)

    def table(self) -> list[dict]:
        return [t.record() for t in self.trials]

    def envelope_record(self) -> dict | None:
        """The lower envelope's least-loss law, for JSON: its runs and L*(C) = E + A·C^−alpha (C = 6·N·D)."""
        if self.envelope is None:
            return None
        return {"runs": self.envelope_runs, "compute": "6*N*D"} | self.envelope.params

    def summary(self) -> str:
        lines = [f"form: {self.form} ({self.why})"]
        others = [f"--form {f} ({FORM_TEXT[f]})" for f in FORM_TEXT if f != self.form and f in {t.form for t in self.trials}]
        if others:  # the form a published fit used is one flag away
            lines.append("  other forms: " + "; ".join(others))
        for t in self.trials:
            sizes = ", ".join(f"{n:.3g}" for n in t.held_out)
            res = (f"failed: {t.failed}" if t.failed else
                   f"mean error {np.mean(t.errors):+.2%}, mean |error| {t.mean_abs:.2%} over {t.errors.size} "
                   f"run{'s' if t.errors.size > 1 else ''} "
                   f"(reaching {t.distance:.2f} e-folds out)")
            lines.append(f"  backtest {t.form:<6} holding out {'N' if t.by == 'size' else 'budget'} = {sizes}: {res}")
        sweep = self.budget_record()
        if sweep is not None:
            how = "traced from the runs' tokens, each named by its runs' median 6·N·D" if self.traced else "given"
            lines.append(f"  budgets ({how}): " + ", ".join(
                f"{b['budget']:.3g} ({b['runs']} run{'s' if b['runs'] > 1 else ''} of {b['sizes']} "
                f"size{'s' if b['sizes'] > 1 else ''})" for b in sweep["budgets"]))
        if self.envelope is not None:
            e = self.envelope
            lines.append(f"  lower envelope: {self.envelope_runs} runs, least loss L*(C) = {e.E:.4f} + {e.A:.4g}·C^-{e.alpha:.4f} "
                         "(C = 6·N·D); the band holds the prediction scaled to it")
        return "\n".join(lines)


def distance(n_params, tokens, fitted_N, fitted_D) -> np.ndarray:
    """e-folds outside the fitted runs (`fitted_N`, `fitted_D`), ≥ 0: the least, over the fitted runs, of
    the larger of log(N / N_run) and log(D / D_run), the growth in both that makes a run at least as
    large as the target (0 when one already is); how far its N or its D lies below the smallest fitted;
    or, where larger, how far its D/N lies outside the fitted runs' range of D/N. Along a fixed token
    ratio this is log(N / the largest N) above the runs, as the curve predictor counts size."""
    N = np.atleast_1d(np.asarray(n_params, dtype=np.float64))
    D = np.atleast_1d(np.asarray(tokens, dtype=np.float64))
    fN = np.asarray(fitted_N, dtype=np.float64).ravel()
    fD = np.asarray(fitted_D, dtype=np.float64).ravel()
    grow = np.maximum(np.log(N[:, None] / fN[None, :]), np.log(D[:, None] / fD[None, :])).min(axis=1)
    shrink = np.maximum(np.log(fN.min() / N), np.log(fD.min() / D))
    r, fr = np.log(D / N), np.log(fD / fN)
    ratio = np.maximum(r - fr.max(), fr.min() - r)
    out = np.maximum(np.maximum.reduce([grow, shrink, ratio]), 0.0)
    return out.reshape(np.broadcast(np.asarray(n_params), np.asarray(tokens)).shape)


def size_classes(N: np.ndarray) -> np.ndarray:
    """Each run's size class: sizes within 1% are one (log N rounded to 2 decimals)."""
    return np.round(np.log(N), 2)


def _scores(trials) -> dict[str, float]:
    """Each form's mean |error| over the held-out sets every form could predict; where there is none, over the
    sets it could predict itself (inf where it could predict none): a form that fails where the other one
    succeeds is not compared on that set, and is not ruled out by it."""
    forms = list(dict.fromkeys(t.form for t in trials))
    cuts: dict[tuple, list[FormTrial]] = {}
    for t in trials:
        cuts.setdefault(t.held_out, []).append(t)
    common = [c for c, ts in cuts.items() if all(np.isfinite(t.mean_abs) for t in ts) and len(ts) == len(forms)]
    out = {}
    for f in forms:
        v = [t.mean_abs for t in trials if t.form == f and np.isfinite(t.mean_abs) and (not common or t.held_out in common)]
        out[f] = float(np.mean(v)) if v else np.inf
    return out


def backtest_forms(N, D, L, *, E: float | None = None, forms=FORMS, budget=None) -> tuple[FormTrial, ...]:
    """Each form fitted without the largest size (and the two largest with 5+ sizes), predicting them; with each
    run's `budget`, without the largest budget (and the two largest with 5+ budgets)."""
    key = N if budget is None else budget
    by = "size" if budget is None else "budget"
    cls = size_classes(key)
    n_sizes = np.unique(cls).size
    if n_sizes < 3:
        return ()
    trials = []
    for _, fit_i, out_i in holdouts(cls, (1, 2) if n_sizes >= 5 else (1,)):
        d = float(distance(N[out_i], D[out_i], N[fit_i], D[fit_i]).max())
        sizes = tuple(float(np.median(key[out_i][cls[out_i] == c])) for c in np.unique(cls[out_i]))
        for form in forms:
            try:
                fit = fit_form(N[fit_i], D[fit_i], L[fit_i], form, E)
            except FitError as exc:
                trials.append(FormTrial(form, sizes, d, np.zeros(0), failed=str(exc), by=by))
                continue
            scatter = float(np.sqrt(fit.s2)) if np.isfinite(fit.s2) else 0.0
            trials.append(FormTrial(form, sizes, d, fit.predict(N[out_i], D[out_i]) / L[out_i] - 1, scatter, by=by))
    return tuple(trials)


NEAR_TIE = 0.1
"""Forms whose backtest scores lie within this share of the larger are said to be nearly tied: the choice between them
rests on little (on OLMo's ladder one copied run turns it)."""


def choose_surface(n_params, tokens, loss, *, E: float | None = None, form: str = "auto",
                   budget=None, infer_budgets: bool = True, names=None) -> SurfaceChoice:
    """The surface fitted in the form a backtest on these runs prefers (`form="auto"`), or in `form`. `budget`:
    each run's compute budget, where the runs are an isoFLOP sweep (module docstring); without it, the budgets
    the runs' tokens trace where they are a sweep (`infer_budgets`). `names`: the runs' names, for the warning that
    names a run the law misses."""
    if form not in ("auto",) + SWEEP_FORMS:
        raise FitError(f"unknown surface form {form!r}; choose auto, free, shared or kaplan")
    N = checks.as_array("n_params", n_params)
    D = checks.as_array("tokens", tokens)
    L = checks.as_array("loss", loss)
    checks.same_length(n_params=N, tokens=D, loss=L)
    swept = sweep_budgets(N, budget, D if infer_budgets else None)
    forms, what = (FORMS, "size") if swept is None else (SWEEP_FORMS, "budget")
    inferred = budget is None and swept is not None
    warnings = checks.units_warnings(L, compute=6 * N * D, n_params=N, tokens=D, counted=True)
    warnings += [] if swept is not None or budget is None else [
        f"the budgets given are not an isoFLOP sweep (fewer than {MIN_SWEPT_BUDGETS} budgets of {isoflop.SWEEP_SIZES} "
        "model sizes or more): the form is backtested by size"]
    budget = swept
    trials = backtest_forms(N, D, L, E=E, forms=forms, budget=budget)
    scores = _scores(trials)
    if form != "auto":
        chosen, why = form, "named"
    elif not trials:
        chosen, why = "free", f"fewer than 3 model {what}s: no backtest possible, the free form"
        warnings.append(f"fewer than 3 model {what}s, so no backtest chose the form or checked its band")
    else:
        ranked = sorted((v, i, f) for i, (f, v) in enumerate(scores.items()) if np.isfinite(v))
        if ranked:
            chosen = ranked[0][2]
            why = (f"lower backtest mean |error| predicting the largest {what} from the smaller ones: "
                   + ", ".join(f"{f} {v:.2%}" if np.isfinite(v) else f"{f} failed" for f, v in scores.items()))
            if len(ranked) > 1 and ranked[1][0] - ranked[0][0] < NEAR_TIE * ranked[1][0]:
                why += (f"; a near tie ({ranked[1][2]} within {NEAR_TIE:.0%}), which a run more or fewer can turn: "
                        f"--form {ranked[1][2]} gives the other")
        else:
            chosen, why = "free", f"no form could be fitted without the largest {what}: the free form"
            warnings.append(f"too few runs below the largest {what} to fit any form, so no backtest chose the form "
                            "or checked its band (" + "; ".join(f"{t.form}: {t.failed}" for t in trials if t.failed) + ")")
    ratio = D / N
    if ratio.max() < ONE_RATIO * ratio.min():
        warnings.append(f"every run trains at about one token ratio (D/N ≈ {np.median(ratio):.3g}): the "
                        "runs cannot tell N's term from D's, so a prediction off that ratio rests on the form alone "
                        "(its e-folds out count how far off); along that ratio the endpoint law L(C) = E + A·C^-alpha "
                        "(`ladder fit endpoint`) has 3 parameters to the surface's 4 or 5")
    fit = fit_form(N, D, L, chosen, E, names)
    others = []
    for other in forms:
        if other != chosen:
            try:
                others.append(fit_form(N, D, L, other, E))
            except FitError:
                continue
    floor = f"{UNTESTED_ERROR:.0%} (one sd) per e-fold of extrapolation"
    tested = _scored(trials, chosen)
    floor_note = (f"bands widened by the backtest's error per e-fold of extrapolation carried to the target, and to at "
                  f"least {floor}" if tested else f"bands widened by {floor}")
    envelope, on_it = envelope_law(N, D, L)
    holds = (["the other forms' predictions" if len(others) > 1 else "the other form's prediction"] if others else []) + (
        ["the prediction scaled to the least loss of the runs' lower envelope at its compute"] if envelope else [])
    if holds:
        floor_note += ", and so that the 90% band holds " + " and ".join(holds)
    if inferred:
        why += f"; {traced(swept)}, so the backtest holds out the largest budgets"
    return SurfaceChoice(chosen, fit, f"{why}; {floor_note}", trials, (N, D), tuple(warnings), tuple(others),
                         envelope, int(on_it.size), swept, inferred)


__all__ = ["FORMS", "FormTrial", "SurfaceChoice", "backtest_forms", "choose_surface", "distance"]
