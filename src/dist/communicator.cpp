#include "dist/communicator.h"

#include <cstring>

#include "tensor/error.h"
#ifdef TFM_HAVE_NCCL
#include "dist/nccl/nccl_communicator.h"
#endif

namespace tfm::dist {

Range share(int64_t n, int rank, int size) {
  return {n * rank / size, n * (rank + 1) / size};
}

namespace {

// Strings as one byte string: each as its length (8 bytes) and its bytes.
std::string pack(const std::vector<std::string>& strings) {
  std::string out;
  for (const std::string& s : strings) {
    const uint64_t n = s.size();
    out.append(reinterpret_cast<const char*>(&n), sizeof n).append(s);
  }
  return out;
}

void unpack(const std::string& bytes, std::vector<std::string>& out) {
  for (size_t at = 0; at < bytes.size();) {
    uint64_t n = 0;
    TFM_CHECK(bytes.size() - at >= sizeof n, "gather_strings: a process sent a cut message");
    std::memcpy(&n, bytes.data() + at, sizeof n);
    at += sizeof n;
    TFM_CHECK(bytes.size() - at >= n, "gather_strings: a process sent a cut message");
    out.emplace_back(bytes, at, n);
    at += n;
  }
}

}  // namespace

std::vector<std::string> gather_strings(Communicator& comm, const std::vector<std::string>& mine) {
  std::vector<std::string> all;
  for (const std::string& bytes : comm.all_gather(pack(mine))) unpack(bytes, all);
  return all;
}

std::vector<double> sum_over(Communicator* comm, std::vector<double> values) {
  if (comm) comm->sum(values);
  return values;
}

std::unique_ptr<Communicator> device_communicator(Communicator& job, bool gpu) {
#ifdef TFM_HAVE_NCCL
  if (gpu && job.size() > 1) return nccl_communicator(job);
#else
  (void)job, (void)gpu;
#endif
  return nullptr;
}

}  // namespace tfm::dist
