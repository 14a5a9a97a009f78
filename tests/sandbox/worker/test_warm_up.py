"""The warm worker's warm-up: what it loads before forking runs, and that no run can tell it happened."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from convcodeworld_gym.sandbox.host.launch import PACKAGE_DIR, worker_boot

#: What a run could read of the process state it is forked with (printed as JSON-able text, before and after).
SNAPSHOT = """
def snapshot():
    import warnings, random
    import numpy as np, pandas as pd, matplotlib, matplotlib.pyplot as plt, matplotlib.units as units
    return repr((warnings.filters, np.geterr(), np.random.get_state()[1].tobytes(), random.getstate(),
                 sorted(matplotlib.rcParams.items()), sorted(map(repr, units.registry.items())), plt.get_fignums(),
                 np.get_printoptions(), pd.get_option('display.max_rows')))
"""


def test_the_warm_up_loads_what_libraries_import_on_first_use_and_changes_nothing_a_run_reads():
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    code = worker_boot(PACKAGE_DIR, start=False) + SNAPSHOT + (
        "import os\nos.environ['MPLBACKEND'] = 'Agg'\n"
        "import numpy, pandas, matplotlib.pyplot\n"
        "wanted = ('numpy.testing', 'pandas.plotting._matplotlib')\n"
        "loaded = [m in sys.modules for m in wanted]\n"
        "before = snapshot()\n"
        "from convcodeworld_gym.sandbox.worker.warm import warm_up\nwarm_up()\n"
        "import json\nprint(json.dumps([loaded, [m in sys.modules for m in wanted], before == snapshot()]))\n")
    out = subprocess.run([sys.executable, "-s", "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == [[False, False], [True, True], True]
