# Source this on the GPU machine (from the repo root) before any sweeper command there:
# installs the carried numpy<2.5 wheel (numba-cuda 0.30.4 does not import with numpy 2.5)
# and makes `sweeper` and `sweeper_kernels` importable without installing the project.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || return 1
ln -sfn "$PWD/kernels" /tmp/site/sweeper_kernels
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
