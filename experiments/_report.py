r"""The results page: each claim of the two papers, its test, numbers, outcome and reason.

Every outcome follows the one rule of :mod:`experiments._outcome`, fixed before any run:
paired differences over seeds (method minus baseline, same seed), their 95 % Student-t
interval, *supported* / *contradicted* / *inconclusive* (a missing value is inconclusive).
A ``--quick`` run draws everything but judges nothing.
"""

from typing import NamedTuple

import numpy as np

from ._outcome import NOT_JUDGED, Outcome, case, combine, min_detectable
from ._stats import mean_ci


def horizon(diag, long) -> float:
    """How many times longer the long runs' horizon is than the main runs'."""
    return float(long.step.values[-1]) / float(diag.step.values[-1])


def captions(diag, long, small) -> dict:
    """The figures' captions, their numbers read from the results."""
    judged = ", ".join(f"{n} ρ = {ds.attrs['judged']:g}" for n, ds in small.items())
    seeds = ", ".join(f"{n} {ds.sizes['seed']}" for n, ds in small.items())
    return {
        "diagonal_shares": f"**Diagonal networks on digits {diag.attrs['digits']}, paired "
        "differences.** Top: each method's share of |β_eff| on the low-intensity pixels minus "
        "GD's (same seed) against time t = kη; bottom: ℓ2-SAM's minus GD's over the "
        f"{horizon(diag, long):g}× longer horizon. Solid: mean; thin pale lines: 95 % t "
        f"interval over {diag.sizes['seed']} seeds.",
        "regime_map_digits": "**The regime map on real data beside the theory's.** Per digit "
        "pair and depth, the regime measured on the full pair (rows: α/ρ) and the single-example "
        "theory's regime at the pair's mean-difference μ (analysis.phase_diagram).",
        "cnn_minor_share": "**CNN attributions over training (default start), paired "
        "differences.** Share of Grad-CAM and of saliency on the minor feature (the weak patch; "
        "the faint stroke pixels of the digits) and accuracy with only the minor feature kept, "
        "minus SGD's, same seed, for ℓ2-SAM at the sweep's largest radius and LE-SAM. Solid: "
        "mean; thin pale lines: 95 % t interval.",
        "cnn_gradcam_maps": "**Grad-CAM maps** of one test image over training, SGD and ℓ2-SAM "
        "(the sweep's best radius) from the same seed; each task's columns at its own "
        "checkpoints.",
        "cnn_flatness": "**LE-SAM minus each comparator**, paired by seed: tr H and λ_max at "
        "fixed training-loss levels (runs that reach the level), and the test-accuracy gap over "
        "training.",
        "cnn_small_start": "**CNNs from a small start, minus SGD (same seed).** Per task: "
        "ℓ2-SAM's training loss and its Grad-CAM and saliency shares on the minor feature at "
        "each radius; last column: test accuracy of ℓ2-SAM minus SGD, both trained on the minor "
        f"feature alone ({judged}). Solid: mean; thin pale lines: 95 % t interval over the "
        f"seeds ({seeds}).",
    }


class Claim(NamedTuple):
    """One row of the outcome table."""

    claim: str
    outcome: Outcome
    test: str  # the predicted side, in words
    opposite: str  # what would have shown the opposite outcome
    numbers: str
    power: str


def _ci(values):
    m, h = mean_ci(np.asarray(values, dtype=np.float64).ravel())
    return float(m), float(h)


def _txt(values, digits=3, scale=1.0):
    m, h = _ci(np.asarray(values, dtype=np.float64) * scale)
    if not np.isfinite(m):
        return "missing"
    return f"{m:+.{digits}f} ± {h:.{digits}f}" if np.isfinite(h) else f"{m:+.{digits}f}"


def _power(cases, scale=1.0):
    """The seeds' smallest detectable effect (in sd of the paired difference) and the largest
    measured half-width over the cases."""
    ns = [int(np.isfinite(np.asarray(v, float)).sum()) for _, v, _ in cases]
    halves = [_ci(np.asarray(v, float) * scale)[1] for _, v, _ in cases]
    halves = [h for h in halves if np.isfinite(h)]
    measured = [n for n in ns if n >= 2]  # a case with fewer values is missing, not powerless
    if not measured:
        return "none: no case has two values"
    missing = len(ns) - len(measured)
    half = f"; half-widths up to {max(halves):.3g}" if halves else ""
    gone = f"; {missing} of {len(ns)} cases missing" if missing else ""
    return f"n ≥ {min(measured)}: {min_detectable(min(measured)):.2f} sd{half}{gone}"


def claim(text, test, opposite, cases, judged=True, digits=3, scale=1.0) -> Claim:
    """A :class:`Claim` from ``cases``: (label, paired differences over seeds, predicted sign)."""
    outs = [case(np.asarray(v, float) * scale, p, label) for label, v, p in cases]
    result = combine(outs) if judged else Outcome(NOT_JUDGED, "--quick run: no outcomes")
    numbers = "; ".join(f"{label}: {_txt(v, digits, scale)}" for label, v, _ in cases)
    return Claim(text, result, test, opposite, numbers, _power(cases, scale))


def at_loss(ds, var, level):
    """``var`` at the first saved step where the loss is at or below ``level``, per leading
    index (the step axis last); NaN where a run never reaches it."""
    loss = ds.loss.values
    reached = loss <= level
    idx = np.argmax(reached, axis=-1)
    vals = np.take_along_axis(ds[var].values, idx[..., None], -1)[..., 0]
    return np.where(reached.any(axis=-1), vals, np.nan)


# --- diagonal networks ----------------------------------------------------------------


def majors_last(long):
    """Per depth: (ℓ2-SAM's change of the low-intensity share from loss 0.5 to the end) minus
    GD's change, paired by seed, on the long-horizon runs; and the two changes."""
    methods = list(long.method.values)
    early = at_loss(long, "low_share", 0.5)  # (method, depth, seed)
    end = long.low_share.values[..., -1]
    change = end - early
    gd, l2 = methods.index("GD"), methods.index("ℓ2-SAM")
    return change[l2] - change[gd], change[gd], change[l2]


def diagonal_section(ds, long, judged=True):
    methods = list(ds.method.values)
    gd, l2 = methods.index("GD"), methods.index("ℓ2-SAM")
    depths = list(ds.depth.values)
    lines = ["## Diagonal networks on the digits", ""]
    lines.append(
        f"Task: digit {ds.attrs['digits']}, {ds.attrs['pixels']} pixels (doubled to ±x), "
        f"{ds.attrs['images_per_seed']} images per seed (a random 80 % subset), {ds.sizes['seed']} "
        f"seeds (subset and start), ρ = {ds.attrs['rho']}, η = {ds.attrs['lr']}, start scales "
        f"α = {ds.attrs['alphas']}, {int(ds.step.values[-1])} steps (GD and ℓ2-SAM also "
        f"{int(long.step.values[-1])} steps at L = {', '.join(str(L) for L in long.depth.values)})"
        ". Low-intensity pixels: mean intensity below the median. Numbers: mean ± 95 % t "
        "interval over seeds."
    )
    lines += [
        "",
        "| L | loss level | low share GD | low share ℓ2-SAM | ℓ2-SAM − GD | ℓ∞-SAM − GD "
        "| LE-SAM − GD |",
        "|---|---|---|---|---|---|---|",
    ]
    for level in (0.5, 0.1, 0.01):
        share = at_loss(ds, "low_share", level)
        for b, depth in enumerate(depths):
            diffs = [share[a, b] - share[gd, b] for a in range(len(methods))]
            lines.append(
                f"| {depth} | {level} | {_txt(share[gd, b])} | {_txt(share[l2, b])} | "
                f"{_txt(diffs[l2])} | {_txt(diffs[methods.index('ℓ∞-SAM')])} | "
                f"{_txt(diffs[methods.index('LE-SAM')])} |"
            )
    lines.append("")
    share = at_loss(ds, "low_share", 0.5)
    early = [(f"L = {L}", share[l2, b] - share[gd, b], 1) for b, L in enumerate(depths) if L >= 2]
    diff, ch_gd, ch_l2 = majors_last(long)
    rank0 = at_loss(long, "dominant_rank", 0.5)
    rank_end = long.dominant_rank.values[..., -1]
    lmethods = list(long.method.values)
    lgd, ll2 = lmethods.index("GD"), lmethods.index("ℓ2-SAM")
    lines += [
        f"Majors last, on the long runs ({int(long.step.values[-1])} steps): change of the "
        "low-intensity share from loss 0.5 to the end (negative: the predictor moves to the bright "
        "pixels), ℓ2-SAM's minus GD's, and the intensity quantile of j† (0 dimmest, 1 brightest):",
        "",
        "| L | change GD | change ℓ2-SAM | ℓ2-SAM − GD | loss at end, ℓ2-SAM | j† GD, loss 0.5 "
        "| j† ℓ2-SAM, loss 0.5 | j† GD, end | j† ℓ2-SAM, end |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    late = []
    for b, depth in enumerate(long.depth.values):
        late.append((f"L = {depth}", diff[b], -1))
        lines.append(
            f"| {depth} | {_txt(ch_gd[b])} | {_txt(ch_l2[b])} | {_txt(diff[b])} | "
            f"{_txt(long.loss.values[ll2, b, :, -1], 5)} | {_txt(rank0[lgd, b], 2)} | "
            f"{_txt(rank0[ll2, b], 2)} | {_txt(rank_end[lgd, b], 2)} | "
            f"{_txt(rank_end[ll2, b], 2)} |"
        )
    lines.append("")
    claims = [
        claim(
            "ℓ2-SAM at L ≥ 2 leans on the minor (low-intensity) pixels early, GD does not",
            "ℓ2-SAM's low-intensity share minus GD's at equal training loss 0.5 > 0 at every L ≥ 2",
            "an interval below 0 at some L ≥ 2",
            early,
            judged,
        ),
        claim(
            "… and moves to the major ones late, more than GD does",
            "(ℓ2-SAM's change of the share from loss 0.5 to the end of the "
            f"{horizon(ds, long):g}× longer horizon) minus GD's < 0 at every L ≥ 2",
            "an interval above 0 at some L ≥ 2 (ℓ2-SAM gains minor share relative to GD)",
            late,
            judged,
        ),
    ]
    if 1 in depths:
        b1 = depths.index(1)
        gaps = np.stack(
            [
                np.abs(at_loss(ds, "low_share", lv)[a, b1] - at_loss(ds, "low_share", lv)[gd, b1])
                for lv in (0.5, 0.1, 0.01)
                for a in range(len(methods))
            ]
        )  # (cases, seed)
        margin = 0.02 - np.nanmax(gaps, axis=0)  # > 0: every method within 0.02 of GD
        cos2 = ds.cos_l2.values[:, b1, :, -1]
        lines.append(
            f"At L = 1 the largest difference of the low-intensity share from GD's, over methods "
            f"and the three loss levels, is {_txt(np.nanmax(gaps, axis=0), 4)} (per seed, mean ± "
            f"interval); the final cosine with the ℓ2 max-margin direction is "
            f"{_txt(cos2[gd])} (GD), {_txt(cos2[l2])} (ℓ2-SAM): the methods agree, and approach "
            "the limit direction only slowly (logistic loss converges in direction at a "
            "logarithmic rate)."
        )
        lines.append("")
        claims.append(
            claim(
                "At L = 1 all methods agree",
                "0.02 minus the largest |share − GD's share| (methods, loss levels) > 0 per seed",
                "an interval below 0: some method differs from GD by more than 0.02",
                [("L = 1", margin, 1)],
                judged,
                digits=4,
            )
        )
    if 2 in depths:
        b2 = depths.index(2)
        c1 = ds.cos_l1.values[:, b2, :, -1]
        lines.append(
            "At L = 2 the final cosine with the ℓ1 max-margin direction is "
            f"{_txt(c1[gd])} (GD) and "
            f"{_txt(c1[l2])} (ℓ2-SAM); with the ℓ2 one {_txt(ds.cos_l2.values[gd, b2, :, -1])} and "
            f"{_txt(ds.cos_l2.values[l2, b2, :, -1])}."
        )
        lines.append("")
    return lines, claims


def regime_section(rm):
    """The real-data regime map as a table: measured (ℓ2-SAM) against the theory, per cell."""
    lines = ["## The regime map on real data", ""]
    lines.append(
        "ℓ2-SAM and GD from the uniform start α (per depth: "
        f"{rm.attrs['alphas']}) on all images of each pair, ρ = α/(α/ρ), η = {rm.attrs['lr']}, "
        f"{int(rm.step.values[-1])} steps. Measured regime by the rule of "
        "`experiments/_regime_map.py` (fixed before the runs); theory: `analysis.phase_diagram` "
        "of the single example μ = |mean of y·x| (the pair's mean-difference vector). GD's "
        "measured regime (last column, at every α/ρ alike) is given for contrast: in the "
        "single-example theory GD from a uniform start is `direct` at every α."
    )
    lines.append("")
    ratios = rm.ratio.values
    lines.append("| pair | L | " + " | ".join(f"α/ρ = {r:g}" for r in ratios) + " | agree | GD |")
    lines.append("|---|---|" + "---|" * (len(ratios) + 2))
    total, agree_n = 0, 0
    for p, pair in enumerate(rm.pair.values):
        for b, depth in enumerate(rm.depth.values):
            meas = rm.measured.values[p, b, 1]
            theo = rm.theory.values[p, b]
            agree = [m == t for m, t in zip(meas, theo, strict=True)]
            total += len(agree)
            agree_n += sum(agree)
            cells = [
                f"{m} / {t}" + (" ✓" if ok else "")
                for m, t, ok in zip(meas, theo, agree, strict=True)
            ]
            lines.append(
                f"| {pair} | {depth} | " + " | ".join(cells) + f" | {sum(agree)}/{len(agree)} | "
                f"{rm.measured.values[p, b, 0, 0]} |"
            )
    lines += [
        "",
        f"Cells: measured / theory. They agree in {agree_n} of {total} cells.",
        "",
    ]
    return lines, agree_n, total


# --- CNNs -------------------------------------------------------------------------------


def _idx(ds, method):
    return list(ds.method.values).index(method)


def _first_half(n):
    """The checkpoints of the first half of training, after step 0, of ``n`` checkpoints."""
    return slice(1, 1 + max(1, (n - 1) // 2))


def _early_end(d):
    """Per seed, a record ``d`` (seed, checkpoint) averaged over the first half of training
    (NaN checkpoints dropped) and at the end."""
    return np.nanmean(d[:, _first_half(d.shape[1])], axis=1), d[:, -1]


def _halves(ds, a, b):
    """Test-accuracy gap of method index ``a`` minus ``b``, per seed: mean over the first half
    of the checkpoints (after step 0) and over the last quarter."""
    gap = ds.test_acc.values[a] - ds.test_acc.values[b]
    n = gap.shape[1]
    return gap[:, _first_half(n)].mean(axis=1), gap[:, -max(1, (n - 1) // 4) :].mean(axis=1)


def minor_words(name) -> str:
    """What the minor (and major) feature of the CNN task ``name`` is, with the patches' Bayes
    accuracies (:func:`experiments._tasks.bayes_accuracy`)."""
    from ._tasks import LOW, MAJOR, MINOR, NOISE, bayes_accuracy

    if name == "patches":
        return (
            f"the weak patch (amplitude {MINOR:g} against the major patch's {MAJOR:g}, noise "
            f"{NOISE:g}: Bayes accuracy {bayes_accuracy(MAJOR):.3f} from the major patch alone, "
            f"{bayes_accuracy(MINOR):.3f} from the minor alone, "
            f"{bayes_accuracy(MAJOR, MINOR):.3f} from both)"
        )
    return (
        f"the faint stroke pixels 0 < x < {LOW:g} (the black background belongs to neither "
        f"set); major: x ≥ {LOW:g}"
    )


def cap_share(ds, method="LE-SAM"):
    """Share of LE-SAM's steps on which its cap binds, per seed (the checkpoint records
    averaged over the training steps)."""
    return ds.capped.values[_idx(ds, method), :, 1:].mean(axis=1)


def cnn_section(cnn, judged=True):
    lines = ["## Small CNNs", ""]
    cases = {k: [] for k in ("flat", "flat_capped", "rhobar", "early", "late")}
    for name, ds in cnn.items():
        a = ds.attrs
        sgd, le, lec = _idx(ds, "SGD"), _idx(ds, "LE-SAM"), _idx(ds, "LE-SAM capped")
        bar, best = _idx(ds, "ℓ2-SAM ρ̄"), _idx(ds, "ℓ2-SAM best")
        capped = cap_share(ds)
        lines.append(
            f"### {name}\n\n{a['train_images']} training images, {a['params']} parameters "
            f"(float32), {a['steps']} steps of batch {a['batch']} at η = {a['lr']}, "
            f"{ds.sizes['seed']} seeds, initial scale {a['init_scale']:g}. LE-SAM: σ₀ = "
            f"{a['sigma0']:.3g} (cosine to 0; the rule: the largest σ₀ at which a pilot LE-SAM run "
            f"from seed {a['pilot_seed']} binds its cap on at most {a['pilot_quantile']:g} of its "
            f"steps, by bisection in log σ₀ below {a['sigma0_sgd_rule']:.3g}, ρ_max times the "
            f"{a['pilot_quantile']:g} quantile of ‖g_k‖/c_k over a pilot SGD run (c_k the cosine "
            f"factor); on the pilot it binds on {a['pilot_share']:.3f} of the steps"
            f"), ρ_max = {a['rho_max']:g}, cap "
            "binding on "
            f"{_txt(capped)} of the steps (share per seed; its own regime asks for < 0.3 in "
            f"every seed: {'met' if np.all(capped < 0.3) else 'not met'}), mean radius "
            f"ρ̄ = {a['rho_bar']:.3f}; "
            f"LE-SAM capped: σ₀ = {a['sigma0_capped']:.3g}, ρ_max = {a['rho_capped']:g}, cap "
            "binding on "
            f"{_txt(cap_share(ds, 'LE-SAM capped'))}. ℓ2-SAM sweep ρ ∈ "
            f"{{{', '.join(f'{r:g}' for r in a['sweep'])}}}; best (final test accuracy): "
            f"ρ = {a['rho_best']:g}. Minor feature: {minor_words(name)}."
        )
        lines += [
            "",
            "| method | radius | final test acc. | acc. only minor | acc. only major "
            "| Grad-CAM minor share − SGD (first half / end) "
            "| saliency minor share − SGD (first half / end) |",
            "|---|---|---|---|---|---|---|",
        ]
        for i, method in enumerate(ds.method.values):
            row = [
                str(method),
                f"{ds.method_rho.values[i]:.3g}",
                _txt(ds.test_acc.values[i, :, -1]),
                _txt(ds.acc_only_minor.values[i, :, -1]),
                _txt(ds.acc_only_major.values[i, :, -1]),
            ]
            for var in ("cam_minor_share", "sal_minor_share"):
                e, end = _early_end(ds[var].values[i] - ds[var].values[sgd])
                row.append(f"{_txt(e)} / {_txt(end)}")
            lines.append("| " + " | ".join(row) + " |")
        lines += [
            "",
            f"Flatness at fixed training-loss levels (each run at its first checkpoint at or below "
            f"the level; a run that never gets there is counted, not averaged in; Hutchinson with "
            f"{a['probes']} probes, power iteration with {a['power_iterations']} steps, on "
            f"{a['flat_images']} training images):",
            "",
            "| level | method | runs there | tr H | λ_max | LE-SAM − method: tr H "
            "| LE-SAM − method: λ_max |",
            "|---|---|---|---|---|---|---|",
        ]
        for j, level in enumerate(ds.level.values):
            for i, method in enumerate(ds.method.values):
                tr, lam = ds.flat_trace.values[i, j], ds.flat_top.values[i, j]
                if not np.isfinite(ds.flat_loss.values[i, j]).any() and method not in (
                    "SGD", "LE-SAM", "LE-SAM capped", "ℓ2-SAM ρ̄", "ℓ2-SAM best"
                ):  # fmt: skip
                    continue
                reached = int(np.isfinite(ds.flat_loss.values[i, j]).sum())
                dt = ds.flat_trace.values[le, j] - tr
                dl = ds.flat_top.values[le, j] - lam
                lines.append(
                    f"| {level:g} | {method} | {reached}/{ds.sizes['seed']} | {_txt(tr, 2)} | "
                    f"{_txt(lam, 2)} | "
                    + ("—" if i == le else _txt(dt, 2))
                    + " | "
                    + ("—" if i == le else _txt(dl, 2))
                    + " |"
                )
            for other, label in ((sgd, "SGD"), (bar, "SAM(ρ̄)"), (best, "SAM(best)")):
                for var, short in (("flat_trace", "tr"), ("flat_top", "λ")):
                    v = ds[var].values
                    cases["flat"].append(
                        (f"{name} {level:g} − {label} {short}", v[le, j] - v[other, j], -1)
                    )
                    cases["flat_capped"].append(
                        (f"{name} {level:g} − {label} {short}", v[lec, j] - v[other, j], -1)
                    )
        lines += [
            "",
            "| method | test-acc. gap to SGD, first half (points) | last quarter (points) |",
            "|---|---|---|",
        ]
        for i, method in enumerate(ds.method.values):
            if i == sgd:
                continue
            e, late = _halves(ds, i, sgd)
            lines.append(f"| {method} | {_txt(e, 2, 100)} | {_txt(late, 2, 100)} |")
        lines.append("")
        cases["rhobar"].append(
            (name, ds.test_acc.values[le, :, -1] - ds.test_acc.values[bar, :, -1], 1)
        )
        cases["early"] += [
            (f"{name} − SGD", _halves(ds, le, sgd)[0], 1),
            (f"{name} − SAM(best)", _halves(ds, le, best)[0], 1),
        ]
        e, late = _halves(ds, best, sgd)
        cases["late"].append((name, late - e, 1))
    claims = [
        claim(
            "LE-SAM (own regime) reaches flatter minima than SGD, SAM(ρ̄) and SAM(best)",
            "LE-SAM minus each comparator < 0 for tr H and λ_max at each loss level, both tasks",
            "an interval above 0 in some case",
            cases["flat"],
            judged,
            digits=2,
        ),
        claim(
            "… the same, LE-SAM capped (ρ_max small: the cap binds on most steps)",
            "LE-SAM capped minus each comparator < 0, as above",
            "an interval above 0 in some case",
            cases["flat_capped"],
            judged,
            digits=2,
        ),
        claim(
            "LE-SAM trains better than ℓ2-SAM at LE-SAM's own mean radius ρ̄",
            "LE-SAM minus SAM(ρ̄) final test accuracy > 0, both tasks",
            "an interval below 0 on some task",
            cases["rhobar"],
            judged,
        ),
        claim(
            "LE-SAM's accuracy gains show throughout training (early too), against SGD and SAM",
            "LE-SAM minus SGD and minus SAM(best) test accuracy over the first half > 0, both "
            "tasks",
            "an interval below 0 in some case",
            cases["early"],
            judged,
            digits=2,
            scale=100,
        ),
        claim(
            "SAM's accuracy gains over SGD come late",
            "SAM(best) − SGD gap in the last quarter minus in the first half > 0, both tasks",
            "an interval below 0 on some task",
            cases["late"],
            judged,
            digits=2,
            scale=100,
        ),
    ]
    return lines, claims


def small_section(small, judged=True):
    """CNNs from a small start: the table per task and the two claims judged on ℓ2-SAM at the
    radius fixed before the run (``attrs['judged']``)."""
    from ._cnnrun import minor_only, sweep_name

    lines = ["## Small CNNs from a small start (the theory's regime)", ""]
    cases = {"attention": [], "minor": []}
    for name, ds in small.items():
        a = ds.attrs
        sgd, sgd_minor = _idx(ds, "SGD"), _idx(ds, minor_only("SGD"))
        judge = _idx(ds, sweep_name(a["judged"]))
        judge_minor = _idx(ds, minor_only(sweep_name(a["judged"])))
        lines += [
            f"### {name}, initial scale {a['init_scale']:g}",
            "",
            f"{a['train_images']} training images, {a['params']} parameters (float32), "
            f"{a['steps']} steps of batch {a['batch']} at η = {a['lr']}, {ds.sizes['seed']} "
            f"seeds, all weights and biases drawn at {a['init_scale']:g} times the default scale. "
            f"ℓ2-SAM at ρ ∈ {{{', '.join(f'{r:g}' for r in a['radii'])}}}; the outcomes judge "
            f"ρ = {a['judged']:g}. Minor feature: {minor_words(name)}. The last two rows are "
            "trained (and tested) on the minor feature alone. ρ/‖θ‖: the radius over the "
            "parameter norm at the start and at the end (mean over seeds).",
            "",
            "| method | ρ | ρ/‖θ‖ start | ρ/‖θ‖ end | final training loss | final test acc. "
            "| test-acc. gap to SGD, first half (points) "
            "| Grad-CAM minor share − SGD (first half / end) "
            "| saliency minor share − SGD (first half / end) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for i, method in enumerate(ds.method.values):
            base = sgd_minor if method.endswith("minor only") else sgd
            rho = float(ds.method_rho.values[i])
            norm = ds.param_norm.values[i]
            gap = _halves(ds, i, base)[0]
            row = [
                str(method),
                f"{rho:g}",
                f"{np.mean(rho / norm[:, 0]):.3f}",
                f"{np.mean(rho / norm[:, -1]):.4f}",
                _txt(ds.train_loss.values[i, :, -1]),
                _txt(ds.test_acc.values[i, :, -1]),
                "—" if i == base else _txt(gap, 2, 100),
            ]
            for var in ("cam_minor_share", "sal_minor_share"):
                if method.endswith("minor only"):
                    row.append("—")
                    continue
                e, end = _early_end(ds[var].values[i] - ds[var].values[sgd])
                row.append("—" if i == sgd else f"{_txt(e)} / {_txt(end)}")
                if i == judge:
                    kind = "Grad-CAM" if var.startswith("cam") else "saliency"
                    cases["attention"] += [(f"{name} {kind} first half", e, 1),
                                           (f"{name} {kind} end", end, 1)]  # fmt: skip
            lines.append("| " + " | ".join(row) + " |")
        stuck = ds.train_loss.values[:, :, -1] >= 0.95 * ds.train_loss.values[:, :, 0]
        lines.append("")
        if stuck.any():
            lines += [
                "Runs that did not train (final training loss at least 0.95 of the start's): "
                + ", ".join(
                    f"{m} ({int(k)} of {ds.sizes['seed']} seeds)"
                    for m, k in zip(ds.method.values, stuck.sum(axis=1), strict=True)
                    if k
                )
                + ". Their differences are 0 by construction, not evidence.",
                "",
            ]
        cases["minor"].append(
            (name, ds.test_acc.values[judge_minor, :, -1] - ds.test_acc.values[sgd_minor, :, -1], 1)
        )
    radius = ", ".join(f"{n}: ρ = {ds.attrs['judged']:g}" for n, ds in small.items())
    claims = [
        claim(
            "From a small start, ℓ2-SAM attends more to the minor feature than SGD (Grad-CAM, "
            "saliency)",
            f"ℓ2-SAM ({radius}) minus SGD minor share > 0, first half and end, both "
            "attributions, both tasks",
            "an interval below 0 in some case",
            cases["attention"],
            judged,
        ),
        claim(
            "Trained on the minor feature alone, ℓ2-SAM learns it better than SGD",
            f"ℓ2-SAM ({radius}) minus SGD, both trained and tested on the minor feature alone: "
            "final test accuracy > 0, both tasks",
            "an interval below 0 on some task",
            cases["minor"],
            judged,
        ),
    ]
    return lines, claims


def spread_notes(spread) -> list:
    """The caveat on the measured spread between two runs (``spread``: the saved result of
    :mod:`experiments._spread`, or None)."""
    if spread is None:
        return ["- The spread between two runs was not measured for this page."]
    per_file = spread["spread"]
    rows = [(f, v, d, n) for f, vs in per_file.items() for v, (d, n) in vs.items()]
    moved = [f"{f} `{v}` {d:.3g}" + (f" ({n} entries finite in one run only)" if n else "")
             for f, v, d, n in rows if d > 0 or n]  # fmt: skip
    head = (
        f"- Measured spread: `{spread['command']}` run twice, in two processes on the machine "
        f"of this page; over {len(rows)} saved variables in {len(per_file)} files, "
    )
    if not moved:
        same = "the largest difference of every saved number is 0 (bit-identical). "
        return [head + same + "That is one machine; on another the float32 CNN numbers move."]
    return [head + "the largest difference per variable that moved: " + "; ".join(moved)
            + f"; the other {len(rows) - len(moved)} variables are identical."]  # fmt: skip


def write_page(path, diag, long, rm, cnn, small, figures, seconds, command, quick=False,
               spread=None):  # fmt: skip
    """Write the results page (markdown) to ``path``; ``figures`` are paths relative to it;
    ``spread``: the measured spread between two runs (:func:`experiments._spread.spread`), or
    None. Returns the claims (:class:`Claim`)."""
    dlines, dclaims = diagonal_section(diag, long, judged=not quick)
    rlines, agree, total = regime_section(rm)
    slines, sclaims = small_section(small, judged=not quick)
    clines, cclaims = cnn_section(cnn, judged=not quick)
    claims = dclaims + sclaims + cclaims
    head = [
        "# Experiments: do the predictions carry over to real data and real networks?",
        "",
        f"Generated by `{command}` in {seconds:.0f} s on 2 CPU cores. The measurements are saved "
        "as netCDF (`diagonal.nc`, `diagonal_long.nc`, `regime_map.nc`, `cnn_patches.nc`, "
        "`cnn_digits.nc`, `cnn_small_patches.nc`, `cnn_small_digits.nc`) in the output folder "
        "(`--out`, default `results/experiments`). "
        "Code: `experiments/`.",
        "",
        "## Outcomes",
        "",
        "Rule (`experiments/_outcome.py`, fixed before the runs, and the setups with it): each "
        "case is a paired difference over seeds (same seed, method minus baseline) and its 95 % "
        "Student-t interval. **supported**: the interval lies on the predicted side of 0; "
        "**contradicted**: on the other side; **inconclusive**: it contains 0 or is missing "
        "(NaN, fewer than two values, a loss level never reached). A claim over several cases is "
        "supported if every case is, contradicted if any case is, inconclusive otherwise. "
        "Power: with n seeds an interval excludes 0 only if the mean exceeds "
        "t₀.₉₇₅,ₙ₋₁/√n standard deviations of the paired difference (1.24 at n = 5).",
        "",
        "| claim | outcome | reason | test (predicted side) | the opposite outcome would be "
        "| numbers (mean ± 95 % interval) | power |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in claims:
        head.append(
            f"| {c.claim} | **{c.outcome.label}** | {c.outcome.reason} | {c.test} | {c.opposite} "
            f"| {c.numbers} | {c.power} |"
        )
    head.append("")
    head.append(
        f"Regime map on real data: measured and theoretical regimes agree in {agree} of {total} "
        "cells (descriptive; no interval)."
    )
    head.append("")
    figs = ["## Figures", ""] + [
        f"![{p.stem}]({p.as_posix()})\n{captions(diag, long, small).get(p.stem, '')}\n"
        for p in figures
        if p.suffix == ".png"
    ]
    notes = [
        "## Caveats",
        "",
        "- Small models on 8×8 images, a CPU budget of minutes: these are checks of direction and "
        "sign, not of the papers' magnitudes on MNIST/CIFAR.",
        "- The CNNs train in float32 (see `experiments/_cnn.py`): their numbers depend on the "
        "machine (the CPU's vector width and XLA's fusion change the rounding, and training "
        "amplifies it). On another machine one CNN number moved from +0.34 ± 0.41 to "
        "+0.03 ± 1.23; the seed-to-seed intervals are the measure of spread, not the last "
        "digits. The diagonal networks run in float64.",
        *spread_notes(spread),
        "- Power iteration returns the eigenvalue of largest magnitude: a negative value means the "
        "run sits near a saddle at that loss.",
        "- What was fixed before this run: the outcome rule, the loss levels, the ℓ2-SAM sweeps, "
        "the regime-map grid and its measured-regime rule, the horizons, the seeds, LE-SAM's "
        "σ₀ rule (pilot runs from a seed outside the evaluation seeds) and ρ_max = 1. A first "
        "full run took σ₀ from the SGD pilot alone; there LE-SAM, at radii near ρ_max = 1, did "
        "not train and its cap bound on most steps in every seed, so the rule now calibrates σ₀ "
        "on a pilot LE-SAM run; this page is the second run. The "
        "small-start radii and the patches' amplitudes were chosen from pilot runs on seed 100 "
        "(not an evaluation seed), SGD and ℓ2-SAM only, looking at training loss and test "
        "accuracy: the larger radius delays the escape from the small start but still trains, "
        "and at amplitudes 0.6/0.3 SGD sat at the Bayes ceiling (0.90 of 0.91), so the minor "
        "patch was made worth more (0.5/0.4); the judged radius is the larger one. Nothing was "
        "changed after this run's outcomes were seen.",
        "",
    ]
    text = "\n".join(head + dlines + rlines + slines + clines + figs + [""] + notes)
    path.write_text(text)
    return claims
