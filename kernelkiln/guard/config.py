"""Guard settings: one pydantic model, every field used by the guard."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class GuardConfig(BaseModel):
    """How strictly and how long the guard checks and times a candidate."""

    model_config = ConfigDict(extra="forbid")

    platform: Literal["cpu", "cuda"] = Field(
        "cpu",
        description=(
            "Where candidates run and are timed (kernelkiln.platforms): cpu, or cuda (models and inputs on the GPU, "
            "each timed batch ends with a device-wide synchronize, input sets rotate through 2x its L2). Without a "
            "GPU, Triton kernels run under Triton's interpreter: checked, never timed."
        ),
    )
    lock_clocks_mhz: int | None = Field(
        None,
        ge=1,
        description=(
            "Lock the device's clocks at this frequency (MHz) while sessions are open (nvidia-smi -lgc on CUDA), so "
            "boost and throttling do not move the numbers; a session refuses to start when locking was asked for and "
            "failed. None: leave the clocks alone."
        ),
    )
    threads: int | None = Field(
        None,
        ge=1,
        description=(
            "Intra-op threads of every worker, reference and candidates alike. None: all cores but one, which is left"
            " to the guard itself; timing on every core is fragile, since one busy core stalls a whole parallel "
            "region."
        ),
    )
    check_trials: int = Field(5, ge=5, description="Correctness trials per workload, each with fresh random inputs.")
    robustness_trials: int = Field(
        2,
        ge=0,
        description=(
            "Extra trials per workload on inputs of the same shapes and dtypes drawn from a wider distribution (every"
            " floating tensor redrawn as normal noise around its mean with twice its spread, so non-negative inputs "
            "gain negative values; integer and bool inputs unchanged). A trial counts only where the reference's "
            "outputs stay finite; a candidate correct on the task's inputs but wrong on these is a REJECT. A task "
            "turns them off with KILN['robustness'] = False."
        ),
    )
    build_timeout_s: float = Field(
        120.0,
        gt=0,
        description=(
            "Wall-clock limit for loading the candidate (its module's own code), and separately for each compile"
            " of its native code or torch extensions (at most 16 per load)."
        ),
    )
    call_timeout_s: float = Field(
        60.0,
        gt=0,
        description=(
            "Wall-clock limit for any one request to a worker (all check trials of one workload, one timing batch)."
        ),
    )
    time_budget_s: float = Field(
        20.0,
        gt=0,
        description="Wall-clock cap on the timing stage of one evaluation; timing stops early when it is reached.",
    )
    memory_limit_mb: int = Field(8192, ge=512, description="Address-space limit of a worker (RLIMIT_AS).")
    file_size_limit_mb: int = Field(256, ge=1, description="Largest file a worker may write (RLIMIT_FSIZE).")
    max_tasks: int = Field(
        64,
        ge=8,
        description=(
            "Processes plus threads a sandboxed worker user may run (RLIMIT_NPROC; applies when the guard runs as "
            "root)."
        ),
    )
    warmup_reps: int = Field(3, ge=1, description="Untimed calls per worker and workload before timing.")
    batch_target_s: float = Field(
        0.005,
        gt=0,
        description=(
            "Shortest target duration of one timed batch; repetitions per batch are chosen to reach it. The guard "
            "raises it, up to 0.25 s, until a request's own measured jitter is under 1% of a batch."
        ),
    )
    min_rounds: int = Field(6, ge=3, description="Interleaved timing rounds before the stop rule may end timing.")
    max_rounds: int = Field(40, ge=3, description="Cap on interleaved timing rounds per workload.")
    max_correction: float = Field(
        0.25,
        gt=0,
        le=1,
        description=(
            "A timing round in which some batch's time rests on taking more than this share of its wall time out by "
            "estimate (run-queue waits: the worker or the guard was kept from running), or whose accounting could not"
            " be read exactly, is dropped and run again, up to max_rounds times per workload (or twice the time "
            "budget); a workload left with fewer than min_rounds clean rounds makes the verdict 'not measured' "
            "(ACCEPT, untimed, never a KEEP). A single-threaded worker's CPU time counts as measured, not estimated."
        ),
    )
    target_rse: float = Field(
        0.01,
        gt=0,
        description="Timing stops once the relative standard error of every workload's speedup is below this.",
    )
    min_margin: float = Field(
        0.03,
        ge=0,
        description="Smallest noise band around the best time: a speedup within it is ACCEPT, not KEEP or REVERT.",
    )
    max_margin: float = Field(
        0.5,
        gt=0,
        description=(
            "Widest noise band, in log-speedup (0.5: a factor of 1.65): on a machine too noisy to say more, a "
            "candidate measured faster or slower than that is still KEEP or REVERT."
        ),
    )
    wait_margin: float = Field(
        0.03,
        ge=0,
        description=(
            "The noise band's floor rises by this times the median share of a round's wall time the workers or the "
            "guard were kept from running (CPU time not granted). A single thread's CPU time stays exact under "
            "load, but each preemption costs it a refill of its caches that no accounting sees: identical "
            "candidates read up to 3.6% apart under CPU hogs on a 2-core VM (benchmarks/guard_soak.py), against "
            "1-2% quiet."
        ),
    )
    replicate: Literal["decisions", "keeps", "none"] = Field(
        "decisions",
        description=(
            "Which verdicts are timed again in fresh processes (reference, incumbent and candidate spawned anew), "
            "standing only where the two figures agree within their noise bands: 'decisions' (KEEP and REVERT), "
            "'keeps' (KEEP only: a false REVERT costs a lost candidate, a false KEEP a false record) or 'none'. A "
            "process can run at a speed of its own for minutes (on a shared 2-core VM: identical code 6% apart in "
            "two processes, quiet, and one worker 2x slower than its twin, with no wait to account for). Two figures "
            "more than their bands apart make the verdict 'not measured'; otherwise the one nearer no difference "
            "stands, against the narrower band widened by the distance between the two, and where that band alone "
            "holds it back from the decision both figures made, the verdict is 'not measured' too (never a tie)."
        ),
    )
    replicate_within: float = Field(
        2.0,
        gt=1,
        description=(
            "Only a decision whose figure lies within this factor of no difference is replicated: a process's "
            "speed of its own moved identical code at most 1.84x here (0.543x-1.239x, benchmarks/guard_under_load.py), "
            "so a REVERT at 0.3x or a KEEP at 3x stands on one timing, and a search's many large losses cost no "
            "second one."
        ),
    )
    replicate_rounds: int = Field(
        6,
        ge=3,
        description=(
            "A replicate looks at its figure once this many timing rounds per workload are clean, and stops where the "
            "figure already decides on its own (beyond its own band, either way: it confirms or contradicts the "
            "first); otherwise it times on under the usual rule. Its processes are not checked again (the first "
            "judgement checked the same source; the timing's own probes still verify outputs), and the reference "
            "stays warm when an incumbent is the rival."
        ),
    )
    margin_sigmas: float = Field(
        3.0,
        ge=0,
        description="Noise band = max(min_margin, margin_sigmas x standard error of the measured log-speedup).",
    )
    flush_factor: float = Field(
        2.0,
        ge=0,
        description=(
            "Timing rotates through input sets whose total size is at least this multiple of the device's last-level "
            "cache (the CPU's largest cache, a GPU's L2), so each call starts cold; the default 2 is the platform's "
            "flush_bytes()."
        ),
    )
    max_input_sets: int = Field(64, ge=2, description="Cap on the number of rotating input sets per workload.")
    idle_probe_s: float = Field(
        0.05, gt=0, description="How long a candidate worker is watched while idle for background CPU use."
    )
    idle_cpu_max: float = Field(
        0.25,
        gt=0,
        description=(
            "Largest share of one core an idle candidate worker may use before it is rejected for background work."
        ),
    )
    sol_hack_factor: float = Field(
        4.0,
        ge=0,
        description=(
            "A candidate measured this many times faster than the speed-of-light bound (max(FLOPs/peak, "
            "bytes/bandwidth) from the task's metadata and `kiln machine`'s peaks) is a REJECT, not a record: it "
            "skipped work or cached a result. Generous because caches can beat DRAM bandwidth; not applied when the "
            "reference breaks the bound too (the metadata or peaks are then suspect). 0 disables the check."
        ),
    )
    isolation: Literal["strict", "best-effort"] = Field(
        "strict",
        description=(
            "strict: refuse to evaluate (one line naming the layer and why) when an isolation layer this kernel "
            "offers could not be applied around a worker or a build; best-effort: run with the layers that held. "
            "Every verdict says which held. kiln optimize's tuner defaults to best-effort (it rewrites seeds the user"
            " installed), everything else to strict."
        ),
    )
    isolate_user: bool = Field(
        True, description="When running as root, run each worker as its own unprivileged user id."
    )
    isolate_network: bool = Field(
        True, description="Give workers and builds an empty network namespace where the OS allows it."
    )
    isolate_filesystem: bool = Field(
        True,
        description=(
            "Give workers a private /tmp, /var/tmp and /dev/shm (their workspace), and hide home directories from "
            "workers and builds, where the OS allows it."
        ),
    )
    forbid_reference_ops: bool = Field(
        True,
        description=(
            "Reject candidates that call the torch ops the reference computes with (tasks may adjust the list)."
        ),
    )
