"""The cluster of a multi-worker run: `TF_CONFIG`, checked before TensorFlow reads it.

TensorFlow reads `TF_CONFIG` lazily and loosely: a JSON list or an empty
object trains as one worker, and a missing task, an index past the cluster
or an unknown task type end in a traceback deep in `tf.distribute`. This
module checks the shape `MultiWorkerMirroredStrategy` needs, with one-line
errors that say what to fix. Standard library only.
"""

import json

# The task types of a `zoo train --strategy multi-worker` cluster: every
# process trains (the chief, or worker 0 without one, writes the run).
TASK_TYPES = ("chief", "worker")
EXAMPLE = (
    'TF_CONFIG=\'{"cluster": {"worker": ["host1:port", "host2:port"]}, '
    '"task": {"type": "worker", "index": 0}}\''
)


def check_tf_config(text, error):
    """The parsed `TF_CONFIG` of a multi-worker run, or `error` (a
    `ZooUserError` class) naming what is wrong in it.

    Args:
        text: the value of the `TF_CONFIG` variable (None: unset).
        error: the exception class to raise.

    Returns:
        The dict: `{"cluster": {type: [address, ...]}, "task": {"type": T,
        "index": I}}`, with I an index into `cluster[T]`.
    """
    if not text:
        raise error(
            "strategy 'multi-worker' reads its cluster from TF_CONFIG, which is not set; "
            f"set it on every worker, e.g. {EXAMPLE}"
        )
    try:
        config = json.loads(text)
    except json.JSONDecodeError as cause:
        raise error(f"TF_CONFIG is not valid JSON: {cause}") from None
    if not isinstance(config, dict):
        raise error(
            f'TF_CONFIG must be a JSON object with "cluster" and "task"; received a '
            f"{type(config).__name__}, e.g. {EXAMPLE}"
        )
    _check_cluster(config.get("cluster"), error)
    _check_task(config.get("task"), config["cluster"], error)
    return config


def _check_cluster(cluster, error):
    if not isinstance(cluster, dict) or not cluster:
        raise error(
            f'TF_CONFIG\'s "cluster" must be an object of task types ({", ".join(TASK_TYPES)}) '
            f"to lists of 'host:port' addresses; received {cluster!r}, e.g. {EXAMPLE}"
        )
    for task_type, addresses in cluster.items():
        if task_type not in TASK_TYPES:
            raise error(
                f"TF_CONFIG's cluster has the task type {task_type!r}; a multi-worker run "
                f"has only {' and '.join(TASK_TYPES)} tasks"
            )
        if (
            not isinstance(addresses, list)
            or not addresses
            or not all(isinstance(address, str) and address for address in addresses)
        ):
            raise error(
                f"TF_CONFIG's cluster {task_type!r} must be a list of 'host:port' addresses; "
                f"received {addresses!r}"
            )
    if len(cluster.get("chief", [])) > 1:
        raise error(f"TF_CONFIG's cluster has {len(cluster['chief'])} chiefs; give at most one")


def _check_task(task, cluster, error):
    if not isinstance(task, dict):
        raise error(
            'TF_CONFIG has no "task" object saying which task this process is, e.g. '
            '"task": {"type": "worker", "index": 0}; '
            f"received {task!r}"
        )
    task_type, index = task.get("type"), task.get("index")
    if task_type not in cluster:
        raise error(
            f"TF_CONFIG's task type {task_type!r} is not in its cluster; choose one of "
            f"{', '.join(map(repr, cluster))}"
        )
    count = len(cluster[task_type])
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise error(
            f"TF_CONFIG's task index {index!r} is not an index of its {count} {task_type!r} "
            f"address(es); give an int from 0 to {count - 1}"
        )
