"""RoPE: relative positions, preserved norms, the matrix form, and why it blocks absorption."""

from __future__ import annotations

import numpy as np
import pytest

from lessons_lib.rope import apply_rope, rope_angles, rotation_matrix


def test_relative_position_property() -> None:
    """Score of q rotated at m with k rotated at n depends only on m - n."""
    rng = np.random.default_rng(0)
    for width in (2, 4, 8, 16):
        q, k = rng.standard_normal(width), rng.standard_normal(width)
        for offset in (-5, 0, 3, 17):
            scores = [
                float(apply_rope(q[None], [m])[0] @ apply_rope(k[None], [m - offset])[0])
                for m in (offset + 1, offset + 7, offset + 40, 1000)
            ]
            assert np.allclose(scores, scores[0], atol=1e-12)
        # and different offsets generally give different scores
        s1 = apply_rope(q[None], [5])[0] @ apply_rope(k[None], [2])[0]
        s2 = apply_rope(q[None], [5])[0] @ apply_rope(k[None], [4])[0]
        assert not np.isclose(s1, s2)


def test_norm_preserved_and_position_zero_is_identity() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 2, 9, 12))
    rotated = apply_rope(x, np.arange(9) * 3)
    assert rotated.shape == x.shape
    assert np.allclose(np.linalg.norm(rotated, axis=-1), np.linalg.norm(x, axis=-1), atol=1e-12)
    assert np.allclose(apply_rope(x, np.zeros(9, dtype=int)), x)
    assert not np.allclose(rotated, x)


def test_rotation_matrix_matches_apply_rope() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal(8)
    for p in (0, 1, 13):
        assert np.allclose(x @ rotation_matrix(p, 8), apply_rope(x[None], [p])[0], atol=1e-12)
    R = rotation_matrix(5, 8)
    assert np.allclose(R @ R.T, np.eye(8), atol=1e-12)  # orthogonal
    # R_m R_n^T = R_{m-n}: only the difference of positions survives between q and k
    assert np.allclose(rotation_matrix(9, 8) @ rotation_matrix(4, 8).T, rotation_matrix(5, 8), atol=1e-12)


def test_angles_follow_base_10000() -> None:
    angles = rope_angles([0, 1, 2], 4)
    assert angles.shape == (3, 2)
    assert np.allclose(angles[1], [1.0, 10000 ** (-2 / 4)])
    assert np.allclose(angles[2], 2 * angles[1])


def test_rope_between_query_and_key_up_projection_breaks_absorption() -> None:
    """Rotating the up-projected keys: folding W_uk into the query no longer gives the same scores."""
    rng = np.random.default_rng(3)
    T, d_c, d = 6, 5, 4
    latent = rng.standard_normal((T, d_c))
    w_uk = rng.standard_normal((d_c, d))
    q = rng.standard_normal((T, d))
    pos = np.arange(T)
    # without RoPE: q . (c W_uk) == (q W_uk^T) . c
    assert np.allclose(q @ (latent @ w_uk).T, (q @ w_uk.T) @ latent.T, atol=1e-12)
    # RoPE on queries and on the up-projected keys
    explicit = apply_rope(q, pos) @ apply_rope(latent @ w_uk, pos).T
    absorbed = (apply_rope(q, pos) @ w_uk.T) @ latent.T  # one fixed matrix cannot know the key's position
    assert np.abs(explicit - absorbed).max() > 1e-2
    # the matrix that would have to sit between q_m and c_n is R_m R_n^T W_uk^T = R_{m-n} W_uk^T
    m, n = 4, 1
    needed = rotation_matrix(m, d) @ rotation_matrix(n, d).T @ w_uk.T
    assert np.isclose(q[m] @ needed @ latent[n], explicit[m, n])
    other = rotation_matrix(m, d) @ rotation_matrix(m, d).T @ w_uk.T  # the (m, m) matrix
    assert not np.allclose(needed, other)


@pytest.mark.parametrize(
    ("d", "message"), [(0, "d must be positive"), (3, "d must be even"), (-2, "d must be positive")]
)
def test_odd_or_nonpositive_width_rejected(d: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rope_angles([0, 1], d)
    assert rope_angles([0, 1], np.int64(4)).shape == (2, 2)  # type: ignore[arg-type]  # NumPy ints are accepted


def test_bad_inputs() -> None:
    x = np.ones((4, 6))
    with pytest.raises(ValueError, match="one position per row"):
        apply_rope(x, [0, 1, 2])
    with pytest.raises(ValueError, match="must be even"):
        apply_rope(np.ones((4, 5)), np.arange(4))
    with pytest.raises(TypeError, match="floating-point"):
        apply_rope(np.ones((4, 6), dtype=int), np.arange(4))
    with pytest.raises(ValueError, match="1-D"):
        apply_rope(x, np.zeros((4, 1)))
    with pytest.raises(ValueError, match="base"):
        rope_angles([0], 4, base=1.0)
    with pytest.raises(TypeError, match="d must be an int"):
        rope_angles([0], 4.0)  # type: ignore[arg-type]
