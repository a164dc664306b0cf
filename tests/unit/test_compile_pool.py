"""The compile pool (sweeper_kernels.build.compile_pool) is made once and kept between calls."""

from __future__ import annotations

import os

from sweeper_kernels import build


def test_the_compile_pool_is_kept_between_calls_and_replaced_only_to_grow():
    build.close_compile_pool()
    try:
        first = build.compile_pool(2)
        assert build.compile_pool(2) is first
        assert build.compile_pool(1) is first  # fewer workers: the same pool
        assert first.submit(os.getpid).result(60) != os.getpid()  # a process of its own
        grown = build.compile_pool(3)
        assert grown is not first and build.compile_pool(3) is grown
    finally:
        build.close_compile_pool()
    assert not build._POOL
