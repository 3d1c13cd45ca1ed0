#pragma once
// The job a launcher started this process in: `mpirun -np N tfm ...`, or Slurm's `srun`
// through PMIx. The command line joins it once, at the start of main; the library's
// training calls then train one model with the job's processes (rank 0 writes).
#include <memory>

#include "dist/communicator.h"

namespace tfm::dist {

// Whether the environment says a launcher started this process as part of a job.
bool launched_by_mpi();
// Joins that job (MPI_Init) where launched_by_mpi(); else does nothing. Throws where the
// launcher started several processes but this build has no MPI. (join.cpp: the only
// code that needs the MPI library, which a program that never joins does not load.)
void join_launched_job();
void adopt_launched_job(std::unique_ptr<Communicator> joined);  // join_launched_job's
// The job joined, or null: this process alone.
Communicator* launched_job();
// Leaves the job (MPI_Finalize) at a normal end, every process having got there.
void leave_launched_job();
// Ends this process at once with `code` after a failure: the launcher then stops the
// other processes, which may be waiting for this one in a collective (leaving the job
// normally would wait for them).
[[noreturn]] void end_after_failure(int code);

}  // namespace tfm::dist
