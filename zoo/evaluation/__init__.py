"""Evaluation: translation BLEU (`bleu`), caption metrics and the attention plots."""
