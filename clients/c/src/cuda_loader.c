/*
 * cuda_loader.c: libcuda's run-time loader (CFrameServerCUDA.h). Its one copy is
 * Sources/CFrameServer/cuda.c, which the Swift library compiles as it is; including it here
 * puts it in every build of the library sources (this Makefile, the Python extension's setup.py).
 */
#include "../../../Sources/CFrameServer/cuda.c"
