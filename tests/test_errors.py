"""Every bad input gets the right exception and a message that helps fix it, in both libraries.

Each row of `BAD_INPUTS` is one mistake a learner can make; it runs against `mha_numpy` and
`mha_torch`. A row lists the exact exception type and message fragments that must all appear.
`MORE_BAD_INPUTS` adds rows whose message depends on the library; each row's ``before`` says what
the core did before it caught that mistake (a regression would bring that back).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch
from numpy.typing import NDArray

from lessons_lib import mha_numpy as nc
from lessons_lib import mha_torch as tc

torch.set_num_threads(1)  # tiny tensors: extra threads only add start-up cost


@dataclass(frozen=True)
class Lib:
    """One library's spelling of the same calls, so each bad input is written once."""

    name: str
    core: ModuleType
    convert: Callable[[NDArray[Any]], Any]
    float32: Any
    float64: Any

    def floats(self, *shape: int, dtype: Any = np.float64) -> Any:
        """Ones of ``shape`` as this library's array, float64 unless ``dtype`` says otherwise."""
        return self.convert(np.ones(shape, dtype=dtype))

    def ints(self, *shape: int) -> Any:
        return self.convert(np.ones(shape, dtype=np.int64))

    def mask(self, allowed: NDArray[Any]) -> Any:
        return self.convert(np.asarray(allowed))

    def layer(self, width: Any = 8, heads: Any = 2, dtype: Any = None) -> Any:
        """A float64 layer (``width``/``heads`` are ``Any``: the table passes wrong types on purpose)."""
        return self.core.MultiHead(width, heads, dtype=self.float64 if dtype is None else dtype)


NUMPY = Lib("mha_numpy", nc, lambda a: a, np.float32, np.float64)
TORCH = Lib("mha_torch", tc, lambda a: torch.from_numpy(np.ascontiguousarray(a)), torch.float32, torch.float64)
LIBS = [pytest.param(NUMPY, id="mha_numpy"), pytest.param(TORCH, id="mha_torch")]


def causal_with_empty_row(T: int, S: int) -> NDArray[np.bool_]:
    """A causal mask whose first query row has been blocked completely."""
    allowed = nc.causal_mask(T, S)
    allowed[0] = False
    return allowed


@dataclass(frozen=True)
class Bad:
    """One bad input: ``call(lib)`` must raise exactly ``error`` with every fragment in its message."""

    id: str
    call: Callable[[Lib], Any]
    error: type[Exception]
    fragments: tuple[str, ...]


BAD_INPUTS = [
    # --- building a layer -------------------------------------------------------------------
    Bad("heads_zero", lambda L: L.layer(8, 0), ValueError, ("heads (h) must be positive, got heads=0",)),
    Bad("heads_negative", lambda L: L.layer(8, -2), ValueError, ("heads (h) must be positive, got heads=-2",)),
    Bad("width_zero", lambda L: L.layer(0, 1), ValueError, ("width (D) must be positive, got width=0",)),
    Bad("width_negative", lambda L: L.layer(-4, 2), ValueError, ("width (D) must be positive, got width=-4",)),
    Bad(
        "width_not_divisible_by_heads", lambda L: L.layer(10, 4), ValueError,
        ("width D=10 is not divisible by heads h=4", "Choose heads from the divisors of 10: [1, 2, 5, 10]"),
    ),
    Bad("heads_float", lambda L: L.layer(8, 2.0), TypeError, ("heads must be an int, got float 2.0",)),
    Bad("heads_bool", lambda L: L.layer(8, True), TypeError, ("heads must be an int, got bool True",)),
    Bad("width_str", lambda L: L.layer("8", 2), TypeError, ("width must be an int, got str '8'",)),
    # --- calling a layer: shapes -------------------------------------------------------------
    Bad(
        "query_rank_2", lambda L: L.layer()(L.floats(3, 8)), ValueError,
        ("query must have exactly 3 axes, laid out as (B, T, D); got shape (3, 8) with 2 axes",),
    ),
    Bad(
        "query_rank_4", lambda L: L.layer()(L.floats(1, 2, 3, 8)), ValueError,
        ("query must have exactly 3 axes", "got shape (1, 2, 3, 8) with 4 axes"),
    ),
    Bad(
        "context_rank_2", lambda L: L.layer()(L.floats(1, 3, 8), L.floats(5, 8)), ValueError,
        ("context must have exactly 3 axes, laid out as (B, S, D)",),
    ),
    Bad(
        "query_width_mismatch", lambda L: L.layer()(L.floats(1, 3, 6)), ValueError,
        ("query has width 6 on its last axis but the layer width D is 8",),
    ),
    Bad(
        "features_on_wrong_axis", lambda L: L.layer()(L.floats(1, 8, 3)), ValueError,
        ("query has width 3", "make sure the last axis holds the features (got shape (1, 8, 3))"),
    ),
    Bad(
        "context_width_mismatch", lambda L: L.layer()(L.floats(1, 3, 8), L.floats(1, 5, 6)), ValueError,
        ("context has width 6 on its last axis but the layer width D is 8",),
    ),
    Bad(
        "batch_mismatch", lambda L: L.layer()(L.floats(2, 3, 8), L.floats(3, 5, 8)), ValueError,
        ("query and context must have the same batch size B, got 2 and 3",),
    ),
    # --- calling a layer: dtypes ---------------------------------------------------------------
    Bad(
        "query_int_dtype", lambda L: L.layer()(L.ints(1, 3, 8)), TypeError,
        ("query must hold floating-point numbers, got dtype", "convert it first"),
    ),
    Bad(
        "context_int_dtype", lambda L: L.layer()(L.floats(1, 3, 8), L.ints(1, 5, 8)), TypeError,
        ("context must hold floating-point numbers",),
    ),
    Bad(
        "query_dtype_differs_from_layer", lambda L: L.layer()(L.floats(1, 3, 8, dtype=np.float32)), TypeError,
        ("query has dtype", "float32 but the layer's weights are", "build the layer with dtype="),
    ),
    Bad(
        "context_dtype_differs_from_layer",
        lambda L: L.layer(dtype=L.float32)(L.floats(1, 3, 8, dtype=np.float32), L.floats(1, 5, 8)),
        TypeError, ("context has dtype", "float64 but the layer's weights are"),
    ),
    Bad("query_list", lambda L: L.layer()([[[1.0] * 8]]), TypeError, ("query must be an array, got list",)),
    # --- calling a layer: masks ------------------------------------------------------------
    Bad(
        "mask_additive_float", lambda L: L.layer()(L.floats(1, 3, 8), None, L.floats(3, 3) * 0), TypeError,
        ("allowed must be a boolean mask (True = may attend), got dtype", "use allowed = (mask == 0)"),
    ),
    Bad(
        "mask_int", lambda L: L.layer()(L.floats(1, 3, 8), None, L.ints(3, 3)), TypeError,
        ("allowed must be a boolean mask",),
    ),
    Bad(
        "mask_list", lambda L: L.layer()(L.floats(1, 3, 8), None, [[True] * 3] * 3), TypeError,
        ("allowed must be a boolean array, got list",),
    ),
    Bad(
        "mask_T_S_swapped", lambda L: L.layer()(L.floats(1, 3, 8), L.floats(1, 5, 8), L.mask(np.ones((5, 3), bool))),
        ValueError, ("allowed has shape (5, 3) but this call needs (T, S) with B=1, h=2, T=3, S=5",),
    ),
    Bad(
        "mask_wrong_batch",
        lambda L: L.layer()(L.floats(2, 3, 8), L.floats(2, 5, 8), L.mask(np.ones((3, 3, 5), bool))),
        ValueError, ("allowed has shape (3, 3, 5) but this call needs (B, T, S) with B=2",),
    ),
    Bad(
        "mask_wrong_heads",
        lambda L: L.layer()(L.floats(1, 3, 8), L.floats(1, 5, 8), L.mask(np.ones((1, 4, 3, 5), bool))),
        ValueError, ("allowed has shape (1, 4, 3, 5) but this call needs (B, h, T, S) with B=1, h=2",),
    ),
    Bad(
        "mask_rank_5", lambda L: L.layer()(L.floats(1, 3, 8), None, L.mask(np.ones((1, 1, 1, 3, 3), bool))),
        ValueError, ("allowed must have shape (T, S), (B, T, S) or (B, h, T, S), got (1, 1, 1, 3, 3)",),
    ),
    Bad(
        "mask_rank_1", lambda L: L.layer()(L.floats(1, 3, 8), None, L.mask(np.ones(3, bool))),
        ValueError, ("allowed must have shape (T, S), (B, T, S) or (B, h, T, S), got (3,)",),
    ),
    Bad(
        "layer_fully_masked_row", lambda L: L.layer()(L.floats(1, 3, 8), None, L.mask(causal_with_empty_row(3, 3))),
        ValueError, ("a query row has no allowed position", "would be 0/0 = NaN"),
    ),
    Bad(
        "layer_fully_masked_row_in_one_head",
        lambda L: L.layer()(L.floats(1, 2, 8), None, L.mask(np.array([[[[1, 1], [1, 0]], [[1, 0], [0, 0]]]], bool))),
        ValueError, ("a query row has no allowed position",),
    ),
    # --- the attention function --------------------------------------------------------------
    Bad(
        "attention_fully_masked_row",
        lambda L: L.core.attention(L.floats(3, 4), L.floats(5, 4), L.floats(5, 4), L.mask(causal_with_empty_row(3, 5))),
        ValueError, ("a query row has no allowed position (its row of `allowed` is all False)",),
    ),
    Bad(
        "attention_q_k_width_mismatch", lambda L: L.core.attention(L.floats(3, 4), L.floats(5, 3), L.floats(5, 3)),
        ValueError, ("q and k must have the same feature width d, got q (3, 4) and k (5, 3)",),
    ),
    Bad(
        "attention_k_v_length_mismatch", lambda L: L.core.attention(L.floats(3, 4), L.floats(5, 4), L.floats(6, 4)),
        ValueError, ("k and v must have the same source length S, got k (5, 4) and v (6, 4)",),
    ),
    Bad(
        "attention_1d_query", lambda L: L.core.attention(L.floats(4), L.floats(5, 4), L.floats(5, 4)),
        ValueError, ("q must have at least 2 axes, laid out as (..., T, d); got shape (4,)",),
    ),
    Bad(
        "attention_1d_value", lambda L: L.core.attention(L.floats(3, 4), L.floats(5, 4), L.floats(5)),
        ValueError, ("v must have at least 2 axes, laid out as (..., S, d_v)",),
    ),
    Bad(
        "attention_list", lambda L: L.core.attention([[1.0]], L.floats(1, 1), L.floats(1, 1)),
        TypeError, ("q must be an array, got list",),
    ),
    Bad(
        "attention_int_values", lambda L: L.core.attention(L.floats(3, 4), L.floats(5, 4), L.ints(5, 4)),
        TypeError, ("v must hold floating-point numbers",),
    ),
    Bad(
        "attention_mixed_float_dtypes",
        lambda L: L.core.attention(L.floats(3, 4, dtype=np.float32), L.floats(5, 4), L.floats(5, 4)),
        TypeError, ("q, k and v must share one dtype, got", "convert them to one precision first"),
    ),
    Bad(
        "attention_leading_axes_do_not_broadcast",
        lambda L: L.core.attention(L.floats(2, 3, 4), L.floats(3, 5, 4), L.floats(3, 5, 4)),
        ValueError, ("the leading (batch/head) axes of q, k and v do not broadcast: (2,), (3,) and (3,)",),
    ),
    Bad(
        "attention_additive_mask",
        lambda L: L.core.attention(L.floats(3, 4), L.floats(5, 4), L.floats(5, 4), L.floats(3, 5) * 0),
        TypeError, ("use allowed = (mask == 0)",),
    ),
    Bad(
        "attention_mask_does_not_broadcast",
        lambda L: L.core.attention(L.floats(3, 4), L.floats(5, 4), L.floats(5, 4), L.mask(np.ones((4, 5), bool))),
        ValueError,
        ("allowed has shape (4, 5), which does not broadcast to the attention scores (..., T, S) = (3, 5)",),
    ),
    Bad(
        "attention_mask_too_many_axes",
        lambda L: L.core.attention(L.floats(3, 4), L.floats(5, 4), L.floats(5, 4), L.mask(np.ones((2, 3, 5), bool))),
        ValueError, ("allowed has shape (2, 3, 5), which does not broadcast",),
    ),
    # --- split / merge -----------------------------------------------------------------------
    Bad(
        "split_heads_not_a_divisor", lambda L: L.core.split_heads(L.floats(1, 2, 6), 4), ValueError,
        ("width D=6 is not divisible by heads h=4", "divisors of 6: [1, 2, 3, 6]"),
    ),
    Bad(
        "split_heads_zero", lambda L: L.core.split_heads(L.floats(1, 2, 6), 0), ValueError,
        ("heads (h) must be positive, got heads=0",),
    ),
    Bad(
        "split_heads_float_heads", lambda L: L.core.split_heads(L.floats(1, 2, 6), 2.0), TypeError,
        ("heads must be an int, got float 2.0",),
    ),
    Bad(
        "split_heads_rank_2", lambda L: L.core.split_heads(L.floats(2, 6), 2), ValueError,
        ("x must have exactly 3 axes, laid out as (B, T, D); got shape (2, 6)",),
    ),
    Bad(
        "split_heads_already_split", lambda L: L.core.split_heads(L.floats(1, 2, 2, 3), 2), ValueError,
        ("x must have exactly 3 axes", "got shape (1, 2, 2, 3) with 4 axes"),
    ),
    Bad(
        "merge_heads_rank_3", lambda L: L.core.merge_heads(L.floats(1, 2, 6)), ValueError,
        ("x must have exactly 4 axes, laid out as (B, h, T, d_h); got shape (1, 2, 6)",),
    ),
    # --- causal masks ------------------------------------------------------------------------
    Bad(
        "causal_S_less_than_T", lambda L: L.core.causal_mask(4, 2), ValueError,
        ("causal_mask needs 0 < T <= S, got T=4, S=2",),
    ),
    Bad(
        "causal_T_zero", lambda L: L.core.causal_mask(0), ValueError,
        ("causal_mask needs 0 < T <= S, got T=0, S=0",),
    ),
    Bad("causal_T_negative", lambda L: L.core.causal_mask(-1, 3), ValueError, ("got T=-1, S=3",)),
    Bad("causal_T_float", lambda L: L.core.causal_mask(2.5, 4), TypeError, ("T must be an int, got float 2.5",)),
    Bad("causal_S_float", lambda L: L.core.causal_mask(2, 4.0), TypeError, ("S must be an int, got float 4.0",)),
]


def check_raises(call: Callable[[], Any], error: type[Exception], fragments: tuple[str, ...]) -> None:
    with pytest.raises(error, match=re.escape(fragments[0])) as info:
        call()
    assert type(info.value) is error, f"expected exactly {error.__name__}, got {type(info.value).__name__}"
    message = str(info.value)
    for fragment in fragments[1:]:
        assert fragment in message, f"{fragment!r} missing from: {message}"


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("bad", BAD_INPUTS, ids=[bad.id for bad in BAD_INPUTS])
def test_bad_input_gets_a_clear_error(bad: Bad, lib: Lib) -> None:
    check_raises(lambda: bad.call(lib), bad.error, bad.fragments)


def test_error_table_is_large_and_ids_are_unique() -> None:
    ids = [bad.id for bad in BAD_INPUTS]
    assert len(ids) >= 25 and len(set(ids)) == len(ids)


@pytest.mark.parametrize("lib", LIBS)
def test_good_versions_of_the_bad_inputs_work(lib: Lib) -> None:
    """The same calls with the mistake fixed succeed, so the table tests the mistake, not the setup."""
    layer = lib.layer()
    output, weights = layer(lib.floats(2, 3, 8), lib.floats(2, 5, 8), lib.mask(np.ones((2, 3, 5), bool)))
    assert tuple(output.shape) == (2, 3, 8) and tuple(weights.shape) == (2, 2, 3, 5)
    fixed_row = causal_with_empty_row(3, 5)
    fixed_row[0, 0] = True
    out, _ = lib.core.attention(lib.floats(3, 4), lib.floats(5, 4), lib.floats(5, 4), lib.mask(fixed_row))
    assert tuple(out.shape) == (3, 4)
    assert tuple(lib.core.split_heads(lib.floats(1, 2, 6), 3).shape) == (1, 3, 2, 2)
    assert tuple(lib.core.causal_mask(2, 4).shape) == (2, 4)


# --- bad inputs whose expected message depends on the library ------------------------------------

OTHER = {"mha_numpy": TORCH, "mha_torch": NUMPY}  # the library a learner may mix in by mistake
ARRAY_NAME = {"mha_numpy": "NumPy array", "mha_torch": "torch.Tensor"}


@dataclass(frozen=True)
class LibBad:
    id: str
    call: Callable[[Lib], Any]
    error: type[Exception]
    fragments: Callable[[Lib], tuple[str, ...]]
    before: str


MORE_BAD_INPUTS = [
    LibBad(
        "empty_source_S_0", lambda L: L.core.attention(L.floats(3, 4), L.floats(0, 4), L.floats(0, 4)),
        ValueError, lambda L: ("S=0",),
        "before: S=0 gives NumPy's 'zero-size array to reduction operation maximum' and torch "
        "silently returns zeros; attention over no positions is undefined and should raise",
    ),
    LibBad(
        "layer_empty_context", lambda L: L.layer()(L.floats(1, 3, 8), L.floats(1, 0, 8)),
        ValueError, lambda L: ("S=0",),
        "before: a context with S=0 is not refused (NumPy: obscure reduction error, torch: zeros)",
    ),
    LibBad(
        "mask_from_other_library",
        lambda L: L.core.attention(L.floats(3, 4), L.floats(3, 4), L.floats(3, 4), OTHER[L.name].core.causal_mask(3)),
        TypeError, lambda L: (f"allowed must be a {ARRAY_NAME[L.name]}",),
        "before: a mask from the other library passes check_bool_mask and then fails deep inside "
        "with '_any() got an unexpected keyword argument dim' (torch) or a torch overload list (NumPy)",
    ),
    LibBad(
        "layer_mask_from_other_library",
        lambda L: L.layer()(L.floats(1, 3, 8), None, OTHER[L.name].core.causal_mask(3)),
        TypeError, lambda L: (f"allowed must be a {ARRAY_NAME[L.name]}",),
        "before: same as mask_from_other_library, through the layer",
    ),
    LibBad(
        "layer_input_from_other_library", lambda L: L.layer()(OTHER[L.name].floats(1, 3, 8)),
        TypeError, lambda L: (f"query must be a {ARRAY_NAME[L.name]}",),
        "before: the dtype message ('query has dtype torch.float64 but the layer's weights are "
        "float64; ... build the layer with dtype=torch.float64') points at the wrong fix",
    ),
    LibBad(
        "attention_inputs_from_other_library",
        lambda L: L.core.attention(*(OTHER[L.name].floats(2, 3, 4) for _ in range(3))),
        TypeError, lambda L: (f"q must be a {ARRAY_NAME[L.name]}",),
        "before: arrays of the other library pass check_float and fail deep inside "
        "(NumPy: \"unsupported operand type(s) for -: 'Tensor' and 'torch.return_types.max'\"; "
        "torch: 'axes don't match array')",
    ),
    LibBad(
        "split_heads_list", lambda L: L.core.split_heads([[[1.0, 2.0]]], 1),
        TypeError, lambda L: ("x must be an array, got list",),
        "before: split_heads on a list raises AttributeError: 'list' object has no attribute 'shape'",
    ),
    LibBad(
        "merge_heads_list", lambda L: L.core.merge_heads([[[[1.0, 2.0]]]]),
        TypeError, lambda L: ("x must be an array, got list",),
        "before: merge_heads on a list raises AttributeError: 'list' object has no attribute 'shape'",
    ),
    LibBad(
        "layer_integer_dtype",
        lambda L: L.core.MultiHead(8, 2, dtype=np.int64 if L is NUMPY else torch.int64),
        TypeError, lambda L: ("dtype must be a floating-point type",),
        "before: NumPy builds a layer whose weights all round to 0; torch raises RuntimeError "
        "'Only Tensors of floating point and complex dtype can require gradients'",
    ),
]


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize(
    "bad", [pytest.param(bad, id=bad.id) for bad in MORE_BAD_INPUTS]
)
def test_library_specific_bad_input_gets_a_clear_error(bad: LibBad, lib: Lib) -> None:
    check_raises(lambda: bad.call(lib), bad.error, bad.fragments(lib))
