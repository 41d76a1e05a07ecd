// A check for the HDF5 fuzz targets: once a reader has returned or thrown, none of the HDF5
// objects it opened may still be open. A leaked id keeps HDF5's metadata -- and, for the in-memory
// files the targets open, a copy of the whole input -- alive for the life of the process, and
// LeakSanitizer cannot see it (HDF5's id table still points at it).
#pragma once

#include <hdf5.h>

#include <cstdio>
#include <cstdlib>

inline void abortIfHdf5ObjectsOpen(const char* reader) {
  const ssize_t open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  if (open != 0) {
    std::fprintf(stderr, "%s left %zd HDF5 objects open\n", reader, open);
    std::abort();
  }
}
