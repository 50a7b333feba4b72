"""What `zoo train` prints on stdout: plain log lines where stdout is not a
terminal, and epochs counted out of the whole run, also when it resumes."""

import io
import re

import pytest

from tiny_configs import tiny_training_preset

from zoo import registry
from zoo.training import checkpoints
from zoo.training import loop as training
from zoo.training import progress

pytestmark = pytest.mark.tensorflow_only  # tf.data training

# A few batches an epoch (one per length bucket and more), a checkpoint
# after each, a log line every two.
TINY_RUN = tiny_training_preset(batch_size=8, epochs=2)
STEP_LINE = re.compile(
    r"epoch (\d)/2, step (\d+)/(\d+), loss \d+\.\d{4}, \d+ tokens/s, \d+:\d\d:\d\d elapsed"
)


class Interrupted(Exception):
    pass


def logged_steps(output):
    """(epoch, step, steps) of each log line of `output`."""
    lines = [STEP_LINE.fullmatch(line) for line in output.splitlines()]
    return [tuple(map(int, line.groups())) for line in lines if line]


def test_a_log_file_gets_plain_lines_and_a_resumed_run_counts_epochs_out_of_all(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(registry.PRESETS, "tiny_run", TINY_RUN)
    monkeypatch.setattr(progress, "LOG_EVERY_STEPS", 2)
    save = checkpoints.save_checkpoint

    def save_then_stop_after_the_first_step(model, folder, epochs_done, steps_done=0):
        save(model, folder, epochs_done, steps_done)
        raise Interrupted  # as a kill would, right after the step's checkpoint

    monkeypatch.setattr(checkpoints, "save_checkpoint", save_then_stop_after_the_first_step)
    out = tmp_path / "run"
    with pytest.raises(Interrupted):
        training.train("tiny_run", out, checkpoint_every_steps=1, evaluate_test=False)
    capsys.readouterr()

    monkeypatch.setattr(checkpoints, "save_checkpoint", save)
    training.train("tiny_run", out, checkpoint_every_steps=1, evaluate_test=False)
    resumed = capsys.readouterr().out  # capsys' stdout is no terminal
    assert not set("\b\r\x1b") & set(resumed), "control characters in a log file"
    first_update = re.findall(r"^first update (\S+) s after the start \((.*)\)$", resumed, re.M)
    assert len(first_update) == 1, resumed
    assert re.fullmatch(r"reading the data \S+ s, vocabularies \S+ s", first_update[0][1])
    # The rest of epoch 1 (from its step 2), then epoch 2: each out of 2,
    # steps counted within the whole epoch, and a line every 2 of them.
    assert re.findall(r"^Epoch \d/\d$", resumed, re.MULTILINE) == ["Epoch 1/2", "Epoch 2/2"]
    steps = logged_steps(resumed)
    assert steps, resumed
    batches = steps[0][2]
    assert steps == [
        (epoch, step, batches) for epoch in (1, 2) for step in range(2, batches + 1, 2)
    ], resumed
    # Keras' line at the end of each epoch (verbose 2, no bar), counting
    # the steps run.
    epoch_lines = re.findall(r"^(\d+)/\1 - .*loss: .*val_loss: ", resumed, re.MULTILINE)
    assert epoch_lines == [str(batches - 1), str(batches)], resumed


def test_a_terminal_gets_keras_progress_bar_and_a_log_file_the_lines():
    class Terminal:
        def isatty(self):
            return True

    verbose, callbacks = progress.fit_logging("auto", 3, 0, lambda: 1.0, stream=Terminal())
    assert verbose == 1 and [type(c) for c in callbacks] == [progress.RunProgbarLogger]
    verbose, callbacks = progress.fit_logging("auto", 3, 0, lambda: 1.0, stream=io.StringIO())
    assert verbose == 2 and [type(c) for c in callbacks] == [
        progress.RunProgbarLogger, progress.StepLog
    ]


def test_a_step_line_of_an_epoch_of_unknown_length_shows_the_count_made_before():
    stream = io.StringIO()
    log = progress.StepLog(
        3, 0, 10.0, every=2, stream=stream, clock=iter(range(100)).__next__, steps_per_epoch=41
    )
    log.set_params({"steps": None})  # a stream whose size was estimated
    log.on_train_begin()
    log.on_epoch_begin(0)
    for batch in range(2):
        log.on_train_batch_end(batch, {"loss": 1.0})
    assert stream.getvalue().startswith("epoch 1/3, step 2/~41, loss 1.0000, ")
