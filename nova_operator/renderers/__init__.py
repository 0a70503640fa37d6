"""Pure renderers: (Nova, inputs) -> config text or manifest dicts; no I/O, no clock, no randomness."""
