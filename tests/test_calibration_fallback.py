"""Which latency calibration each GPU uses, chosen from data (gpuopt/data/latency_calibration.yaml): its own
fitted entry, its architecture's, or an explicitly borrowed one that the plan and `gpuopt fit` report."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from gpuopt.cli.main import cli
from gpuopt.hardware import get_gpu, gpu_table
from gpuopt.physics import latency_factors
from gpuopt.physics.latency_factors import LatencyCalibration


def test_every_architecture_in_the_gpu_table_is_fitted_or_borrows_by_an_explicit_rule() -> None:
    cal = latency_factors.calibration()
    placed = set(cal.architectures) | set(cal.borrowed)
    assert sorted({g.architecture for g in gpu_table().values()} - placed) == []


def test_every_borrowing_names_a_fitted_entry_and_gives_a_reason() -> None:
    cal = latency_factors.calibration()
    for arch, rule in cal.borrowed.items():
        assert rule.uses in cal.architectures, arch
        assert rule.why.strip(), arch


@pytest.mark.parametrize(("gpu", "entry"), [("H100-SXM-80GB", "Hopper"), ("H800-80GB", "Hopper"),
                                            ("H200-141GB", "H200-141GB"), ("A100-SXM-40GB", "Ampere"),
                                            ("A10-24GB", "Ampere"), ("T4-16GB", "Turing")])
def test_fitted_gpus_use_their_own_entry_and_report_no_borrowing(gpu: str, entry: str) -> None:
    cal = latency_factors.calibration()
    factors, borrowed = cal.lookup(get_gpu(gpu))
    assert factors == cal.architectures[entry]
    assert borrowed is None
    assert latency_factors.borrowed_calibration(get_gpu(gpu)) is None


@pytest.mark.parametrize("gpu", ["L40S-48GB", "V100-32GB", "B200-180GB", "MI300X-192GB", "GH200-96GB"])
def test_unfitted_architectures_borrow_what_the_data_names(gpu: str) -> None:
    cal = latency_factors.calibration()
    spec = get_gpu(gpu)
    rule = cal.borrowed[spec.architecture]
    factors, borrowed = cal.lookup(spec)
    assert factors == cal.architectures[rule.uses]
    assert borrowed is not None
    assert (borrowed.gpu, borrowed.architecture, borrowed.borrowed_from) == (gpu, spec.architecture, rule.uses)
    assert borrowed.note == (f"{gpu} ({spec.architecture}): latency predicted with the {rule.uses} calibration "
                             f"({rule.why})")


def test_an_architecture_without_a_rule_falls_back_to_the_default_and_says_so() -> None:
    cal = latency_factors.calibration()
    spec = get_gpu("H100-SXM-80GB").model_copy(update={"gpu": "X1-64GB", "architecture": "Future"})
    factors, borrowed = cal.lookup(spec)
    assert factors == cal.architectures[cal.default_architecture]
    assert borrowed is not None and borrowed.borrowed_from == cal.default_architecture
    assert borrowed.why == "no calibration and no borrowing rule for Future: the default"


def test_a_borrowing_from_an_unfitted_architecture_is_rejected() -> None:
    data = latency_factors.calibration().model_dump()
    data["borrowed"] = {"Blackwell": {"uses": "Volta", "why": "older"}}
    with pytest.raises(ValidationError, match="borrows from unfitted \\['Volta'\\]"):
        LatencyCalibration.model_validate(data)


def test_borrowed_notes_are_one_per_distinct_gpu_sorted_and_skip_fitted_ones() -> None:
    notes = latency_factors.borrowed_notes(["L40S-48GB", "H100-SXM-80GB", "L4-24GB", "L40S-48GB", "T4-16GB", ""])
    assert [n.split(" ")[0] for n in notes] == ["L4-24GB", "L40S-48GB"]


def test_fit_notes_a_borrowed_calibration_on_stderr_only() -> None:
    args = ["fit", "--model", "Qwen/Qwen3-8B", "--input-tokens", "1000", "--output-tokens", "200", "--gpu"]
    borrowed = CliRunner().invoke(cli, [*args, "L40S-48GB"])
    own = CliRunner().invoke(cli, [*args, "H100-SXM-80GB"])
    assert borrowed.exit_code == 0 and own.exit_code == 0
    note = latency_factors.borrowed_calibration(get_gpu("L40S-48GB"))
    assert note is not None
    assert borrowed.stderr == f"note: {note.note}\n"
    assert "calibration" not in borrowed.stdout
    assert own.stderr == ""
