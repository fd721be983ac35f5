"""gpuopt's one reader of today (gpuopt/clock.py)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_today_is_the_utc_day_whatever_the_local_time_zone():
    """QA: the same plan made at one instant was dated 2026-12-04 in UTC and 2026-12-05 in Kiritimati (UTC+14),
    its price ages a day apart. Every zone reads the UTC day. (At any instant one of UTC+14 and UTC-11 is on
    another calendar day than UTC -- Kiritimati from 10:00 UTC, Pago Pago before 11:00 -- so the local day fails
    this test whenever it runs.)"""
    code = ("import datetime as dt; from gpuopt import clock; "
            "print(clock.today() == dt.datetime.now(dt.timezone.utc).date())")
    for zone in ("Pacific/Kiritimati", "Pacific/Pago_Pago", "UTC"):
        env = {k: v for k, v in os.environ.items() if k != "GPUOPT_TODAY"} | {"TZ": zone}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "True", (zone, out.stderr)


def test_the_latest_day_is_today_or_the_day_after_and_gpuopt_today_pins_both(monkeypatch):
    """A quote dated by a local business day east of UTC may be a day after the UTC day (review: Beijing's morning
    dated an overlay row "after today"): dates are refused only past the latest day anywhere (UTC+14)."""
    import datetime as dt

    from gpuopt import clock

    monkeypatch.delenv("GPUOPT_TODAY", raising=False)
    assert clock.latest_day() - clock.today() in (dt.timedelta(0), dt.timedelta(days=1))
    monkeypatch.setenv("GPUOPT_TODAY", "2026-11-29")
    assert clock.latest_day() == clock.today() == dt.date(2026, 11, 29)
