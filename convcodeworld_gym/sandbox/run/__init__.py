"""Runs in one run's processes: the test runner, the judge's two sides, and what crosses between them.

A split run has two processes: the program's, which runs the program, and the judge's, which runs the tests; every
value of the program's that the tests touch crosses to the judge encoded (:mod:`.codec`) or as a stand-in
(:mod:`.standin`), never as a live object. :mod:`.events` is the run's parent side: it reads what the runner reports.

Holds:
    runner           the test runner: one program against its unittest suite, reported as sealed events
    events           the parent's side: read the events on a clock, and turn them into a result
    judge            the split judge: the program's side and the judge's side of one run
    codec            values encoded for crossing, without unpickling or importing anything the sender names
    standin          the judge's stand-ins for program objects, and the operations they refuse
    mirror           library objects rebuilt in the judge (a class claim alone buys nothing)
    mirror_allowed   what the judge may rebuild, and the methods reviewed as honest
    mocks            the tests' mocks, applied in the program's process too
    shared           state the program and the judge share (cwd, files, the random generators)
    rng_fingerprint  fingerprints of the random generators, to see whether a program steered them
    iocheck          an input/output test's verdict in the judge: its dataset's comparison rule on the program's data
    ioprogram        the program's side of an input/output test: runs the model's code on an input, returns data
"""

__all__ = ["runner", "events", "judge", "codec", "standin", "mirror", "mirror_allowed", "mocks", "shared",
           "rng_fingerprint", "iocheck", "ioprogram"]
