# `cmake --install BUILD --prefix PREFIX` (for environment modules and container images):
#   PREFIX/bin                      the programs, the launch scripts (the MPIJob launcher's
#                                   entrypoint, run_hosts.sh, slurm_train.sbatch) and the SIGTERM
#                                   forwarder they find beside them;
#   PREFIX/share/ringtrain/data     the data scripts, with the scripts/lib files they and
#                                   run_hosts.sh source (they find the programs in PREFIX/bin:
#                                   scripts/lib/common.sh);
#   PREFIX/share/ringtrain/profiles the gradient profiles `ringtrain bench --profile NAME` reads
#                                   (it looks beside its bin/, as in the build folder).
# The tests, the benchmark scripts and the other scripts of scripts/mpirun stay in the checkout.
include(GNUInstallDirs)
install(TARGETS ringtrain allreduce_perf model_step_perf hdf5_read_perf mnist_json_to_idx
                idx_to_hdf5 gpt2_tokenize
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(PROGRAMS k8s/launcher-entrypoint.sh scripts/lib/forward_sigterm.sh
                 scripts/mpirun/run_hosts.sh scripts/mpirun/slurm_train.sbatch
        DESTINATION ${CMAKE_INSTALL_BINDIR})
set(_ringtrain_share ${CMAKE_INSTALL_DATADIR}/ringtrain)
install(PROGRAMS data/fetch_mnist.sh data/fetch_gpt2_vocab.sh data/prepare_fortunes.sh
        DESTINATION ${_ringtrain_share}/data)
install(FILES scripts/lib/common.sh scripts/lib/fetch.sh scripts/lib/args.sh
        DESTINATION ${_ringtrain_share}/scripts/lib)
install(DIRECTORY bench/profiles DESTINATION ${_ringtrain_share} FILES_MATCHING PATTERN "*.txt")
