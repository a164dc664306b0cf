# Sourced by sweep.sh and gpu_tests.sh on a GPU machine without internet access.
# A wheelhouse (SWEEPER_WHEELHOUSE, default .whl/) holds wheels for what the machine's python3
# lacks (on an image with numpy 2.5: a numpy below 2.5, which numba-cuda needs). They are
# installed with `pip install --no-index --find-links` into a private site folder, and sweeper
# runs from this checkout (kernels/ importable as sweeper_kernels), without a venv.
WHEELHOUSE=${SWEEPER_WHEELHOUSE:-.whl}
SITE=${SWEEPER_SITE:-/tmp/sweeper-site}
python3 -m pip install -q --no-index --find-links "$WHEELHOUSE" --no-deps --no-compile \
  --target "$SITE" "$WHEELHOUSE"/*.whl || return 1
ln -sfn "$PWD/kernels" "$SITE/sweeper_kernels"
export PYTHONPATH="$SITE:$PWD" PYTHONUNBUFFERED=1
# a wheel's commands (ninja, which torch.utils.cpp_extension builds with) on the PATH
if [ -d "$SITE/bin" ]; then export PATH="$SITE/bin:$PATH"; fi
