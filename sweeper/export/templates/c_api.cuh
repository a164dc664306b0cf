extern "C" cudaError_t sweeper_launch_relu_$dtype(const void* in, void* out, size_t n, cudaStream_t s) {
  return sweeper_relu::launch_relu(static_cast<const $ctype*>(in), static_cast<$ctype*>(out), n, s);
}
extern "C" const char* sweeper_relu_choice_$dtype(size_t n) { return sweeper_relu::relu_choice_$dtype(n); }
