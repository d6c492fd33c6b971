// tandem train --nproc-per-node N: the launcher torchrun is, for this
// machine. It starts N copies of this program as ranks 0..N-1 with
// torchrun's variables (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE), forwards Ctrl-C to all of them, and when one
// fails stops the others and says which rank it was.
#pragma once

namespace tandem::cli {

// argv is the launcher's own command line; every rank gets it without
// --nproc-per-node. Returns the exit code: 0, the first failing rank's, or
// 130 after Ctrl-C.
int launch_ranks(int argc, char** argv, int nproc);

}  // namespace tandem::cli
