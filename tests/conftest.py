"""Test-suite settings shared by every module.

Property tests run without a deadline (the CI machine is small and shared) and, when the
``CI`` environment variable is set, derandomized: CI then checks the same examples on every
run, so a red CI always means a change broke something. Local runs keep exploring new
examples; `make test-slow` runs the long explorations.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "ci", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") else "default")
