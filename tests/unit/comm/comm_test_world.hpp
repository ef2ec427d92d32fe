// The communicator of the whole test run, made once by the test main from the environment: a single rank when the
// executable runs alone, MPI when it runs under mpirun.
#pragma once

#include "backend/comm/communicator.hpp"

namespace qrt::test {

Communicator& world_communicator();

}  // namespace qrt::test
