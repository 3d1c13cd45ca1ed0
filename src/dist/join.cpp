// join_launched_job, apart from the rest of launched_job.h: the one place that makes an
// MPI communicator, so that the library (libtfm.so) links MPI only where a program joins.
#include <cstdlib>

#include "dist/launched_job.h"
#include "tensor/error.h"

#ifdef TFM_HAVE_MPI
#include "dist/mpi/mpi_communicator.h"
#endif

namespace tfm::dist {

namespace {

// The job's size as the launcher announces it (OpenMPI's mpirun, PMIx, PMI-2), or 0.
[[maybe_unused]] int announced_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 0;
}

}  // namespace

void join_launched_job() {
  if (launched_job() || !launched_by_mpi()) return;
#ifdef TFM_HAVE_MPI
  adopt_launched_job(std::make_unique<MpiCommunicator>());
#else
  TFM_CHECK(announced_size() <= 1, "this tfm was built without MPI, so it cannot join the " << announced_size()
                                       << " processes the launcher started; install libopenmpi-dev and rebuild (scripts/install-deps.sh)");
#endif
}

}  // namespace tfm::dist
