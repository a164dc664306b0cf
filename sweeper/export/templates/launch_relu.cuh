inline cudaError_t launch_relu(const $ctype* in, $ctype* out, size_t n, cudaStream_t s = 0) {
  const detail::DeviceInfo& d = detail::device_info();
  if (d.status != cudaSuccess) return d.status;
  switch (d.entry[$dt_index]) {
$dispatch_cases
    default: $generic_launch
  }
}
// The config launch_relu would use for $dtype and n on the current device (for tests).
inline const char* relu_choice_$dtype(size_t n) {
  const detail::DeviceInfo& d = detail::device_info();
  if (d.status != cudaSuccess) return "";
  switch (d.entry[$dt_index]) {
$choice_cases
    default: return $generic_name;
  }
}
// The policy entry launch_relu uses for $dtype on the current device (for logs): its index in
// the header's entry table, -1 for the generic config, -2 if the device could not be read.
inline int relu_entry_$dtype() {
  const detail::DeviceInfo& d = detail::device_info();
  return d.status != cudaSuccess ? -2 : d.entry[$dt_index];
}
