r"""The theorem-check report: claims C1–C4 of science.md §4 run as numerical experiments.

Each check is one row: claim, setting, prediction, measurement, tolerance and a
result, ``PASS`` or ``FAIL``, or ``WAITING (...)`` for a row that needs ℓ∞-SAM
solves while :func:`flows.solve` cannot finish them (status ``max_steps`` or
``nonfinite``: issue 3). WAITING rows never count as failures; as soon as the
ℓ∞-SAM solver finishes, the same rows compute real results. An exception inside a
check is a FAIL whose measurement is the error message, never a silent skip.
"""

import dataclasses
import json
import os
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np

import flows

from ._boundary import critical_alpha, direct_alpha
from ._bounds import l2sam_thresholds
from ._margin import convergence_rate, direction_cosine, limit_direction, max_margin
from ._plateau import loss_plateau
from ._regime import regime_path

WAITING = "WAITING (issue 3: ℓ∞-SAM Filippov solver)"
# One saving grid and escape_tol for the rescaled ℓ2-SAM solves of C3 and C4 (one compilation).
PLATEAU_GRID = jnp.linspace(0.0, 40.0, 4001)


@dataclasses.dataclass
class Row:
    """One line of the report."""

    claim: str
    setting: str
    prediction: str
    measurement: str
    tolerance: str
    result: str  # "PASS", "FAIL" or WAITING


class _Waiting(Exception):
    """An ℓ∞-SAM solve did not finish (status max_steps / nonfinite)."""


def _finished(traj, method):
    """Raise _Waiting when an ℓ∞-SAM solve did not finish; other methods pass through."""
    if isinstance(method, flows.LinfSAM) and int(traj.status) in (
        flows.Status.MAX_STEPS,
        flows.Status.NONFINITE,
    ):
        raise _Waiting(f"solve ended with status {traj.status_name}")
    return traj


def _row(claim, setting, prediction, tolerance, measure, linf=False):
    """Run ``measure() -> (measurement, ok)`` and build the row (FAIL on any exception)."""
    try:
        measurement, ok = measure()
        result = "PASS" if ok else "FAIL"
    except _Waiting as err:
        measurement, result = f"not measured: {err}", WAITING
    except RuntimeError as err:
        if linf and ("max_steps" in str(err) or "nonfinite" in str(err)):
            measurement, result = f"not measured: {err}", WAITING
        else:
            measurement, result = f"error: {err}", "FAIL"
    except Exception as err:  # a broken check must show up as FAIL, with its reason
        measurement, result = f"error: {type(err).__name__}: {err}", "FAIL"
    return Row(claim, setting, prediction, measurement, tolerance, result)


def _fmt(x):
    return np.format_float_scientific(x, precision=2) if x != 0 else "0"


def _vec(v):
    return "(" + ", ".join(f"{x:g}" for x in np.asarray(v)) + ")"


def _separable_data(n=8, d=5, seed=0):
    """Random labels, x_i = y_i u_i with u_i > 0: separable, max-margin solutions ≥ 0."""
    rng = np.random.default_rng(seed)
    y = rng.choice([-1.0, 1.0], n)
    return flows.Dataset(y[:, None] * rng.uniform(0.2, 1.0, (n, d)), y)


# --- C1: L = 1 -> ℓ2 max margin ------------------------------------------------------


def _direction_rows(claim, method, name, data, depth, alpha, ref, other, t1, tol, linf):
    """Plain flow to t1 on a log grid: 1 - cos to ``ref`` must fall below ``tol``, still falling."""
    ts = jnp.concatenate([jnp.zeros(1), jnp.geomspace(1.0, t1, 21)])
    setting = f"{name}, L={depth}, n={data.n}, d={data.d}, alpha={alpha}, logistic, t1={t1:.0e}"

    def measure():
        traj = _finished(
            flows.solve(method, data, flows.balanced_init(alpha, depth, data.d), t1=t1, ts=ts),
            method,
        )
        gap = 1 - direction_cosine(traj, ref)
        rate = convergence_rate(traj, ref, model="log", tail=0.5)
        text = (
            f"1-cos at t=1e2,1e{int(np.log10(t1)) // 2},{t1:.0e}: "
            f"{_fmt(gap[3])}, {_fmt(gap[11])}, {_fmt(gap[-1])}; "
            f"(log t)^-k fit k={rate.rate:.2f}"
        )
        ok = gap[-1] <= tol and np.all(np.diff(gap[-5:]) < 0)
        if other is not None:
            gap_other = 1 - direction_cosine(traj, other)[-1]
            text += f"; 1-cos to the other max-margin {_fmt(gap_other)}"
            ok = ok and gap_other > 5 * gap[-1]
        return text + f"; {int(traj.n_steps)} steps", bool(ok)

    return _row(
        claim,
        setting,
        "beta/|beta| -> " + ("l2" if claim == "C1" else "l1") + " max-margin (scipy)",
        f"1-cos <= {tol:g} and decreasing"
        + ("; 5x closer than to l2" if other is not None else ""),
        measure,
        linf,
    )


def check_c1(quick=False):
    data = _separable_data()
    w2 = max_margin(data, 2)
    t1 = 1e100 if quick else 1e200
    tol = 1e-3 if quick else 1e-4
    methods = [("GD", flows.GD())]
    if not quick:
        methods += [("l2-SAM rho=0.1", flows.L2SAM(0.1)), ("linf-SAM rho=0.1", flows.LinfSAM(0.1))]
    return [
        _direction_rows(
            "C1", m, name, data, 1, 0.1, w2, None, t1, tol, isinstance(m, flows.LinfSAM)
        )
        for name, m in methods
    ]


# --- C2: ℓ∞-SAM, L >= 2: limits chosen by alpha and rho -------------------------------


def _linf_limit_row(mu, alpha, depth, rho, escape_tol):
    """Rescaled ℓ∞-SAM: limit e_{j*}, j* = argmax_{alpha_j > rho} mu_j (alpha_j - rho)^(L-2)."""
    mu, alpha = np.asarray(mu), np.asarray(alpha)
    score = np.where(alpha > rho, mu * (alpha - rho) ** (depth - 2), -np.inf)
    j_star = int(np.argmax(score))
    method = flows.LinfSAM(rho)
    setting = f"linf-SAM, L={depth}, mu={_vec(mu)}, alpha={_vec(alpha)}, rho={rho}"
    minor = " (a minor feature)" if j_star != int(np.argmax(mu)) else " (the major feature)"

    def measure():
        traj = _finished(
            flows.solve(
                method,
                flows.single_example(mu),
                flows.balanced_init(alpha, depth),
                t1=1e3,
                rescaled=True,
                escape_tol=escape_tol,
            ),
            method,
        )
        gap = 1 - limit_direction(traj)[j_star]
        text = f"status {traj.status_name} at tau={float(traj.t_end):.4g}; "
        text += f"1-cos(beta, e_{j_star + 1}) = {_fmt(gap)}"
        return text, traj.status_name == "escaped" and gap <= 1e-9

    return _row(
        "C2", setting, f"limit e_{j_star + 1}{minor}", "escaped, 1-cos <= 1e-9", measure, True
    )


def _linf_fate_row(mu, alpha, rho):
    """L = 2: beta_j -> 0 if alpha_j < rho, stays rho^2 if alpha_j = rho (even L)."""
    mu, alpha = np.asarray(mu), np.asarray(alpha)
    method = flows.LinfSAM(rho)
    dies, stays = alpha < rho, alpha == rho
    setting = f"linf-SAM, L=2, mu={_vec(mu)}, alpha={_vec(alpha)}, rho={rho}"

    def measure():
        traj = _finished(
            flows.solve(
                method,
                flows.single_example(mu),
                flows.balanced_init(alpha, 2),
                t1=1e3,
                rescaled=True,
                escape_tol=1e12,
            ),
            method,
        )
        b = np.asarray(flows.beta(traj.theta_end))
        dead = float(np.max(np.abs(b[dies])) / rho**2)
        held = float(np.max(np.abs(b[stays] - rho**2)) / rho**2)
        text = f"max|beta_dying|/rho^2 = {_fmt(dead)}, max|beta_held - rho^2|/rho^2 = {_fmt(held)}"
        return text + f" (tau_end={float(traj.t_end):.4g})", dead <= 1e-10 and held <= 1e-8

    pred = f"beta_j -> 0 for j in {(np.flatnonzero(dies) + 1).tolist()}, = rho^2 for j in "
    pred += f"{(np.flatnonzero(stays) + 1).tolist()}"
    return _row("C2", setting, pred, "dying <= 1e-10, held <= 1e-8 (relative)", measure, True)


def _gd_row(mu, alpha):
    mu, alpha = np.asarray(mu), np.asarray(alpha)
    j = int(np.argmax(mu))
    setting = f"GD, L=2, mu={_vec(mu)}, alpha={_vec(alpha)}"

    def measure():
        traj = flows.solve(
            flows.GD(),
            flows.single_example(mu),
            flows.balanced_init(alpha, 2),
            t1=1e3,
            rescaled=True,
            escape_tol=1e12,
        )
        gap = 1 - limit_direction(traj)[j]
        return f"status {traj.status_name}; 1-cos(beta, e_{j + 1}) = {_fmt(gap)}", gap <= 1e-9

    return _row(
        "C2", setting, f"limit e_{j + 1} = e_argmax(mu) for any alpha", "1-cos <= 1e-9", measure
    )


def _linf_alpha_c_row(mu, rho, rtol):
    setting = f"linf-SAM, L=2, mu={_vec(mu)}, rho={rho}, uniform alpha"

    def measure():
        b = critical_alpha(flows.LinfSAM(rho), mu, rtol=rtol, full_output=True)
        err = abs(b.alpha / rho - 1)
        return (
            f"alpha_c = {b.alpha:.10g} (rel. err {_fmt(err)}, {b.solves} solves)",
            err <= 2 * rtol,
        )

    return _row(
        "C2",
        setting,
        f"alpha_c = rho = {rho} (coordinates decouple)",
        f"rel. err <= {2 * rtol:g}",
        measure,
        True,
    )


def check_c2(quick=False):
    mu = [1.0, 2.0, 3.0, 4.0]
    # L = 2 escapes exponentially: stop at 1e12 |theta0| so that the direction has converged.
    rows = [_linf_limit_row(mu, [0.3, 0.1, 0.06, 0.04], 2, 0.1, 1e12)]
    if quick:
        return rows
    return rows + [
        _linf_fate_row(mu, [0.3, 0.1, 0.06, 0.04], 0.1),
        _linf_limit_row(mu, [0.3, 0.3, 0.3, 0.3], 2, 0.1, 1e12),
        # L = 3 blows up in finite tau; escape at 1e3 |theta0| (the solve fails near the pole).
        _linf_limit_row(mu, [0.6, 0.25, 0.12, 0.11], 3, 0.1, 1e3),
        _gd_row(mu, [0.3, 0.1, 0.06, 0.04]),
        _linf_alpha_c_row(mu, 0.1, 1e-8),
    ]


# --- C3: ℓ2-SAM, L = 2 -> ℓ1 max margin -----------------------------------------------


def check_c3(quick=False):
    mu = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    single = flows.single_example(mu)
    b1 = max_margin(single, 1)
    setting = f"l2-SAM rho=1, L=2, mu={_vec(mu)}, alpha=0.5 (R2), rescaled, escape 1e12"

    def measure_single():
        traj = flows.solve(
            flows.L2SAM(1.0),
            single,
            flows.balanced_init(0.5, 2, 5),
            t1=1e3,
            rescaled=True,
            escape_tol=1e12,
            ts=PLATEAU_GRID,
        )
        gap = 1 - float(limit_direction(traj) @ b1)
        rate = convergence_rate(traj, b1, model="exp", tail=0.3)
        expect = 4 * (mu[-1] - mu[-2])
        text = (
            f"1-cos = {_fmt(gap)} at tau={float(traj.t_end):.4g}; exp rate {rate.rate:.4f} "
            f"(GD-phase asymptote 4(mu5-mu4) = {expect:g})"
        )
        return text, gap <= 1e-9 and abs(rate.rate / expect - 1) <= 0.02

    rows = [
        _row(
            "C3",
            setting,
            f"beta/|beta| -> l1 max-margin {_vec(np.round(b1, 12))} (HiGHS LP)",
            "1-cos <= 1e-9; rate within 2%",
            measure_single,
        )
    ]
    if quick:
        return rows
    data = _separable_data()
    t1 = 1e200
    rows.append(
        _direction_rows(
            "C3",
            flows.L2SAM(0.05),
            "l2-SAM rho=0.05",
            data,
            2,
            0.1,
            max_margin(data, 1),
            max_margin(data, 2),
            t1,
            1e-2,
            False,
        )
    )
    return rows


# --- C4: ℓ2-SAM, L = 2, regimes in alpha ---------------------------------------------


def check_c4(quick=False):
    mu = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    rho, lam = 1.0, 3.0
    rtol = 1e-6 if quick else 1e-8
    method = flows.L2SAM(rho)
    bounds = l2sam_thresholds(mu, rho)
    base = f"l2-SAM, L=2, mu={_vec(mu)}, rho={rho}"
    rows, found = [], {}

    def m_alpha_c():
        b = critical_alpha(method, mu, rtol=rtol, full_output=True)
        found["c"] = b.alpha
        width = (b.bracket[1] - b.bracket[0]) / b.alpha
        ok = bounds.all_shrink < b.bracket[0] and b.bracket[1] < bounds.all_grow and width <= rtol
        return f"alpha_c = {b.alpha:.10f} (bracket width {_fmt(width)}, {b.solves} solves)", ok

    rows.append(
        _row(
            "C4",
            base,
            f"{bounds.all_shrink:.6f} < alpha_c < {bounds.all_grow:.6f} "
            "(sympy: all shrink / all grow)",
            f"bisection width <= {rtol:g}",
            m_alpha_c,
        )
    )

    def m_alpha_s():
        b = direct_alpha(method, mu, rtol=rtol, full_output=True)
        found["s"] = b.alpha
        err = abs(b.alpha / bounds.direct - 1)
        return f"alpha_s = {b.alpha:.10f} (rel. err {_fmt(err)})", err <= 2 * rtol

    rows.append(
        _row(
            "C4",
            base,
            f"sequential/direct boundary = rho(mu5+mu4)/(sqrt2|mu|) = {bounds.direct:.10f} (sympy)",
            f"rel. err <= {2 * rtol:g}",
            m_alpha_s,
        )
    )

    if quick:
        return rows

    def m_scale():
        m = flows.L2SAM(lam * rho)
        rc = critical_alpha(m, mu, rtol=rtol) / found["c"]
        rs = direct_alpha(m, mu, rtol=rtol) / found["s"]
        err = max(abs(rc / lam - 1), abs(rs / lam - 1))
        return f"alpha_c ratio {rc:.10f}, alpha_s ratio {rs:.10f}", err <= 4 * rtol

    rows.append(
        _row(
            "C4",
            base + f" vs rho={lam * rho}",
            f"rays alpha = k rho: both ratios = {lam}",
            f"rel. err <= {4 * rtol:g}",
            m_scale,
        )
    )

    if "c" not in found or "s" not in found:
        return rows
    a_c, a_s = found["c"], found["s"]
    alphas = [0.9 * a_c, a_c * (1 + 1e-6), 1.05 * a_c, 0.5 * (a_c + a_s), 1.1 * a_s]
    paths = {}

    def m_regimes():
        for a in alphas:
            paths[a] = regime_path(method, mu, a)
        names = [paths[a].regime for a in alphas]
        order = {"collapse": 0, "sequential": 1, "direct": 2}
        ranks = [order.get(n, -1) for n in names]
        ok = min(ranks) >= 0 and ranks == sorted(ranks) and set(ranks) == {0, 1, 2}
        return ", ".join(f"{a / a_c:.6g}: {n}" for a, n in zip(alphas, names, strict=True)), ok

    rows.append(
        _row(
            "C4",
            base + ", alpha/alpha_c in " + _vec(np.array(alphas) / a_c),
            "collapse (R1) -> sequential (R2) -> direct (R3) as alpha grows",
            "all three, in this order",
            m_regimes,
        )
    )
    if not paths:
        return rows

    r1 = paths[alphas[0]]
    rows.append(
        _row(
            "C4",
            base + f", alpha = {alphas[0]:.6g} (R1)",
            "collapse; loss stays at l(0) = log 2",
            "|loss/log2 - 1| <= 1e-5",
            lambda: (
                f"{r1.regime} at tau={r1.t_end:.4g}, loss = {r1.loss_end:.8f}",
                r1.regime == "collapse" and abs(r1.loss_end / np.log(2) - 1) <= 1e-5,
            ),
        )
    )
    for a in alphas[1:-1]:
        p = paths[a]
        seq = "->".join(str(j + 1) for j in p.sequence)
        times = ", ".join(f"{t:.6g}" for t in p.times)
        rows.append(
            _row(
                "C4",
                base + f", alpha = {a:.10g} (alpha/alpha_c = {a / a_c:.6g})",
                "R2: j† visits minor indices, then settles on 5 (monotone? measured)",
                "sequence ends at 5 and visits another index",
                lambda p=p, seq=seq, times=times: (
                    f"j† = {seq} at tau = {times}; "
                    f"monotone in mu: {'yes' if p.monotone else 'no'}; "
                    f"{p.restarts} restarts",
                    p.regime == "sequential",
                ),
            )
        )
    # The R2 plateau: just above alpha_c the path lingers at the saddle w = (rho/sqrt2) e_j,
    # where beta_j = rho^2/2 and the loss is l(mu_j rho^2 / 2).
    a = alphas[1]

    def m_plateau():
        traj = flows.solve(
            method,
            flows.single_example(mu),
            flows.balanced_init(a, 2, 5),
            t1=1e3,
            rescaled=True,
            ts=PLATEAU_GRID,
            escape_tol=1e12,
        )
        pl = loss_plateau(traj, band=1e-3)
        j = int(np.argmax(np.abs(np.asarray(traj.beta))[int(np.searchsorted(traj.ts, pl.end)) - 1]))
        predicted = float(np.log1p(np.exp(-mu[j] * rho**2 / 2)))
        after = np.asarray(traj.loss)[np.asarray(traj.ts) > pl.end + 2.0]
        text = (
            f"plateau tau in [{pl.start:.3g}, {pl.end:.3g}], height {pl.height:.8f} at j†={j + 1} "
            f"(predicted {predicted:.8f}); loss 2 tau-units after it: {_fmt(after[0])}; "
            f"j† reaches 5 only at tau = {paths[a].times[-1]:.4g}"
        )
        return text, abs(pl.height / predicted - 1) <= 1e-3 and pl.duration > 1.0

    rows.append(
        _row(
            "C4",
            base + ", alpha = alpha_c(1+1e-6), rescaled, band 1e-3",
            "loss plateau at the saddle beta_j = rho^2/2: height l(mu_j rho^2/2)",
            "height rel. err <= 1e-3, duration > 1",
            m_plateau,
        )
    )
    return rows


CHECKS = (check_c1, check_c2, check_c3, check_c4)


def run_checks(quick: bool = False) -> list:
    """Run C1–C4 (``quick``: looser tolerances and fewer points) and return the rows."""
    return [row for check in CHECKS for row in check(quick)]


def format_table(rows) -> str:
    """The rows as a plain-text table, one line per check."""
    cols = [f.name for f in dataclasses.fields(Row)]
    lines = [" | ".join(c.upper() for c in cols)]
    lines += [" | ".join(getattr(r, c) for c in cols) for r in rows]
    return "\n".join(lines)


def failed(rows) -> bool:
    """True when any row is a FAIL (WAITING rows are not failures)."""
    return any(r.result == "FAIL" for r in rows)


def _unwritable(path: Path) -> str | None:
    """Why a file cannot be written at ``path`` (without creating it), or None."""
    folder = path.parent
    if path.is_dir():
        return "is a folder, not a file"
    if not folder.is_dir():
        return f"{folder} is not a folder" if folder.exists() else f"no such folder {folder}"
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return "not writable"
    return None


def main(argv=None) -> int:
    """``python -m analysis check [--quick] [--json PATH]``; returns the exit status."""
    from flows._cli import ArgumentParser

    parser = ArgumentParser(prog="python -m analysis", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="run claims C1-C4 as experiments, one row per check")
    check.add_argument("--json", metavar="PATH", help="also write the table as JSON to PATH")
    check.add_argument("--quick", action="store_true", help="looser tolerances, fewer points")
    args = parser.parse_args(argv)
    if args.json:  # the output path is checked first, not after minutes of checks
        problem = _unwritable(Path(args.json))
        if problem:
            parser.error(f"--json {args.json}: {problem}")
    start = time.perf_counter()
    rows = run_checks(quick=args.quick)
    elapsed = time.perf_counter() - start
    print(format_table(rows))
    counts = {k: sum(r.result.startswith(k) for r in rows) for k in ("PASS", "FAIL", "WAITING")}
    print(
        f"{len(rows)} checks: "
        + ", ".join(f"{v} {k}" for k, v in counts.items())
        + f" ({elapsed:.0f} s)"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "rows": [dataclasses.asdict(r) for r in rows],
                    "seconds": elapsed,
                    "quick": args.quick,
                },
                fh,
                indent=2,
                ensure_ascii=False,
            )
    return 1 if failed(rows) else 0
