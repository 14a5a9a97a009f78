"""What happens after episodes are played: running a batch, scoring, reporting and checking.

Modules (import the one you need; this package imports none of them, so scoring a log
loads neither Gymnasium nor the sandbox):
    evaluate          play every task of chosen ids with a policy and log every turn (``convcodeworld evaluate``)
    log_scores        the paper's scores (Pass@1, MRR, Recall) of turn logs, live and static
    correlation       Spearman correlation of static (ConvCodeBench) and live scores
    report            the tables and plots of a run directory (``convcodeworld report``)
    reference_import  turn the reference's published logs into a replayable turn log
    selfcheck         run every task's canonical solution (``convcodeworld selfcheck``)
"""

__all__: list[str] = []
