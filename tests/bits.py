"""Floats compared bit for bit."""

import numpy as np


def same_bits(a, b) -> bool:
    """The same bits, a NaN's sign and payload aside: IEEE leaves which NaN an operation on
    two NaNs returns to the code (LLVM may swap an addition's operands)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return bool(np.array_equal(np.isnan(a), np.isnan(b))
                and np.where(np.isnan(a), 0.0, a).tobytes() == np.where(np.isnan(b), 0.0,
                                                                        b).tobytes())
