"""Inference: a trained run reopened as a `Translator` or a `Captioner`."""
