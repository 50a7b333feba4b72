"""What `zoo bench` reports: the results (with the versions and the machine
they were measured on) and the Markdown table."""

import importlib.metadata
import os
import platform


def results(runner, settings, command, load_before):
    """The JSON-ready results of `runner`'s cases, run with `settings`."""
    import keras

    return {
        "command": command,
        "backend": keras.backend.backend(),
        "versions": versions(),
        "machine": {
            **machine(),
            "threads": threads(),
            "load_before": load_before,
            "load_after": os.getloadavg(),
        },
        "settings": settings,
        "cases": [case.to_json() for case in runner.cases],
        "skipped": runner.skipped,
    }


def versions():
    """Installed versions of the libraries that set the speed (None: absent).

    Read from the package metadata, so that no other backend is imported."""
    names = ("keras", "tensorflow", "jax", "jaxlib", "torch", "numpy", "onnxruntime")
    found = {"python": platform.python_version()}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def machine():
    """The cores and CPU model the numbers were measured on."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu_count": os.cpu_count(),
        "usable_cores": usable,
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
    }


def _cpu_model():
    """The CPU's model name from /proc/cpuinfo, where there is one."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def threads():
    """The thread settings in force: the environment variables that set them,
    and torch's own count on torch (its kernels' OpenMP threads)."""
    import keras

    names = ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "XLA_FLAGS")
    found = {name: os.environ[name] for name in names if name in os.environ}
    if keras.backend.backend() == "torch":
        import torch

        found["torch.get_num_threads()"] = torch.get_num_threads()
    return found


def format_timing(timing):
    """`median [q25, q75]`, all in the median's unit."""
    if timing is None:
        return "-"
    median = timing.median
    scale, unit = (1e6, "µs") if median < 1e-3 else (1e3, "ms") if median < 1.0 else (1.0, "s")

    def digits(value):
        value *= scale
        return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"

    low, high = timing.quartiles
    return f"{digits(median)} {unit} [{digits(low)}, {digits(high)}]"


def markdown_table(cases):
    """The cases as a Markdown table: ours, reference, and their ratio."""
    lines = [
        "| suite | case | size | compiled | ours | reference | ratio | note |",
        "| :-- | :-- | :-- | :-- | --: | --: | --: | :-- |",
    ]
    for case in cases:
        ratio = "-" if case.ratio is None else f"{case.ratio:.2f}"
        lines.append(
            f"| {case.suite} | {case.name} | {case.size} | {case.compiled} | "
            f"{format_timing(case.ours)} | {format_timing(case.reference)} | {ratio} | "
            f"{case.note} |"
        )
    return "\n".join(lines)


def markdown_report(results, cases):
    """The whole printed report: what ran where, the table and the skips."""
    versions = ", ".join(f"{k} {v}" for k, v in results["versions"].items() if v)
    machine = results["machine"]
    settings = results["settings"]
    lines = [
        f"`{results['command']}`",
        "",
        f"Backend {results['backend']}; {versions}; {machine['cpu_count']} cores "
        f"({machine['cpu_model']}), load average {machine['load_before'][0]:.2f} before, "
        f"{machine['load_after'][0]:.2f} after"
        + "".join(f"; {name}={value}" for name, value in machine["threads"].items())
        + ".",
        f"Times: median [interquartile range] of at least {settings['repeats']} calls "
        f"(quick cases: enough to fill {settings['min_time']:g} s) after "
        f"{settings['warmup']} warm-up calls, ours and reference interleaved; "
        "ratio = ours / reference at the median (below 1: ours is faster).",
        "",
        markdown_table(cases),
    ]
    if results["skipped"]:
        lines.append("")
        lines.extend(f"- {s['suite']}: skipped: {s['reason']}" for s in results["skipped"])
    return "\n".join(lines)
