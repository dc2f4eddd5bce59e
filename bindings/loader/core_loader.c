/* core_loader.c — `require "dle.core"`: sets how long idle OpenMP and OpenBLAS threads spin, then loads the
 * native module (dle.native, which links libgomp and OpenBLAS) and returns it.
 *
 * Why a separate module: libgomp reads OMP_WAIT_POLICY once, when it is loaded. Its default
 * lets idle worker threads spin after every parallel region, and on a 2-core machine they then
 * steal the cores from OpenBLAS's threads and from the Lua thread itself (measured: a
 * Fashion-MNIST MLP epoch 3x slower, a third of the time spinning in libgomp). Only this module
 * runs before libgomp is loaded, so only it can choose "passive". A value the user set wins.
 *
 * OpenBLAS's worker threads likewise spin (calling sched_yield) for 2^28 cycles, about 0.1 s,
 * after each threaded gemm before they sleep; OpenBLAS reads OPENBLAS_THREAD_TIMEOUT when it is
 * loaded. In a training step the next gemm comes a few milliseconds later, after elementwise ops
 * that run on dle's own threads, and the spinning worker takes a core from them (the char-GPT
 * step at 2 threads: a fifth of all CPU time in sched_yield). 2^16 cycles (tens of microseconds)
 * still bridges back-to-back gemms, as in the MLP's step. */
#include <stdlib.h>

#include <lua.h>

int luaopen_dle_core(lua_State *L) {
  setenv("OMP_WAIT_POLICY", "passive", 0);
  setenv("OPENBLAS_THREAD_TIMEOUT", "16", 0);
  lua_getglobal(L, "require");
  lua_pushstring(L, "dle.native");
  lua_call(L, 1, 1);
  return 1;
}
