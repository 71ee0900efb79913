// A collective that the plugin builds from MPI point-to-point messages
// instead of calling libnbc, advanced step by step by whoever polls the op
// (a waiting caller or the progress thread). Nothing in it blocks: every
// step is MPI_Isend/MPI_Irecv, and Test only tests, so a wait on it keeps
// its deadline like any other op.
//
// Its messages go over the communicator's second MPI communicator (never
// the one user send/recv share), tagged with the op's collective sequence
// number, so two such ops in flight at once never match each other's
// messages.
#ifndef DIST_PLUGINS_BACKENDS_MPI_P2P_SCHEDULE_H_
#define DIST_PLUGINS_BACKENDS_MPI_P2P_SCHEDULE_H_

#include <cstdint>

namespace dist_mpi {

class P2pSchedule {
 public:
  virtual ~P2pSchedule() = default;

  // Posts the first messages (and does any local copy). Returns an MPI
  // error code.
  virtual int Start(int tag) = 0;
  // Advances as far as the messages that arrived allow; sets *done once
  // every message completed. Returns an MPI error code.
  virtual int Test(bool* done) = 0;

  // The tag for collective #seq: MPI guarantees tags up to 32767.
  static int TagFor(uint64_t collective_seq) { return static_cast<int>(collective_seq & 0x7fff); }
};

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_P2P_SCHEDULE_H_
