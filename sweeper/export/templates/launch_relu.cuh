inline cudaError_t launch_relu(const $ctype* in, $ctype* out, size_t n, cudaStream_t s = 0) {
  const detail::DeviceInfo& d = detail::device_info();
  if (d.status != cudaSuccess) return d.status;
  switch (d.entry[$dt_index]) {
$dispatch_cases
    default: return cudaErrorNotSupported;  // the policy has no bands for this dtype
  }
}
// The config launch_relu would use for $dtype and n on the current device (for tests).
inline const char* relu_choice_$dtype(size_t n) {
  const detail::DeviceInfo& d = detail::device_info();
  if (d.status != cudaSuccess) return "";
  switch (d.entry[$dt_index]) {
$choice_cases
    default: return "";
  }
}
