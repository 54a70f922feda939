"""The figures' names and one-line summaries, in the order they are made.

Kept apart from the figure modules (which load JAX and matplotlib) so that
``python -m figures --help`` lists them at once; each figure's ``FigureSpec`` takes its
summary from here, and :data:`figures.FIGURES` its order.
"""

SUMMARIES: dict[str, str] = {
    "regime_map": "ℓ2-SAM regimes against depth L = 1..8 over α/ρ, with k_c, k_direct and the "
    "(ρ, α) rays",
    "minor_first": "α against rescaled time τ coloured by j†(τ) at ρ = 1, L = 2, every switch "
    "marked",
    "trajectories": "β_j/‖β‖ of ℓ2-SAM (L = 2) for α → α_c, the loss against GD's, plateau and "
    "switch times",
    "linf_limits": "ℓ∞-SAM limit over (α1, α2) at L = 2, 3, 4 against claim C2, with the tie "
    "curves of ℓ∞-SAM and GD",
    "discrete": "iterates over the flow (ℓ2-SAM; ℓ∞-SAM with sliding), error against η, fitted "
    "slopes",
    "steps": "j† of discrete ℓ2-SAM (flows.iterate) at t = 60 over the step size η and α/α_c near "
    "the flow's α_c, beside the flow's",
    "depth": "j† maps of ℓ2-SAM for L = 2, 3, 4 on the norm clock s, with α_c and α_direct per "
    "depth",
    "lesam": "LE-SAM at ρ_max = 0.3: regimes over (σ, α) with ℓ2-SAM's and its own boundaries",
    "lesam_flatness": "LE-SAM's radius ρ_t and ‖∇L‖ in time, and the Hessian trace / top "
    "eigenvalue over GD's at equal loss (ℓ2-SAM at ρ_max and at LE-SAM's mean radius, LE-SAM "
    "constant and annealed)",
    "lesam_time": "j† of LE-SAM (single example, L = 2) against τ beside ℓ2-SAM's, at the default "
    "σ, smaller σ and σ(t) annealed, with ρ_t and σ(t) on the real clock t",
    "mechanism": "log-growth rates of β_j for GD and ℓ2-SAM (L = 2) against τ, with ‖∇m‖ and ‖∇L‖, "
    "the fastest-growing index and j† (claim C5)",
    "max_margin": "cosine of β(τ) with the ℓ1 and ℓ2 max-margin directions at L = 2 and 1, GD and "
    "ℓ2-SAM, fitted rates (claims C3, C1)",
    "sparsity": "sparse regression on a u⊙v network (the reference code's data): test loss and "
    "‖β‖₁ of unnormalised SAM and 1-SAM against ρ at two α, flows and discrete updates, beside GD, "
    "its predicted limit and the minimum-ℓ1 and minimum-ℓ2 interpolators",
}
