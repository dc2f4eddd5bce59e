/* cuda_info.c — the module dle.cuda_info: what the CUDA runtime says about the devices (count,
 * properties from which peak rates follow) and a device-wide synchronize, for scripts/gpu-check's
 * benchmark. Built where nvcc is found (premake5.lua); it links libcudart only, and nothing loads it
 * but a script that asks. Without a driver or device, count() is 0 with the reason. */
#include <cuda_runtime.h>
#include <lauxlib.h>
#include <lua.h>

static void check_cuda(lua_State *L, cudaError_t e, const char *fn, const char *call) {
  if (e == cudaSuccess) return;
  cudaGetLastError(); /* clears a non-sticky error for the next call */
  luaL_error(L, "%s: %s failed: %s (%s)", fn, call, cudaGetErrorName(e), cudaGetErrorString(e));
}

/** count() -> the number of CUDA devices, or 0 and the reason. */
static int l_count(lua_State *L) {
  int n = 0; /* without a driver the call fails and leaves n untouched */
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    lua_pushinteger(L, 0);
    lua_pushfstring(L, "cudaGetDeviceCount: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
    return 2;
  }
  lua_pushinteger(L, n);
  return 1;
}

static int device_arg(lua_State *L, const char *fn) {
  lua_Integer i = luaL_optinteger(L, 1, 0);
  int n = 0;
  check_cuda(L, cudaGetDeviceCount(&n), fn, "cudaGetDeviceCount");
  if (i < 0 || i >= n)
    luaL_error(L, "%s: device %I is not one of the %d CUDA devices", fn, (LUAI_UACINT)i, n);
  return (int)i;
}

/** properties(i) -> {name, major, minor, sm_count, clock_khz, memory_clock_khz, bus_width_bits,
 * total_memory} of device i (default 0). */
static int l_properties(lua_State *L) {
  int i = device_arg(L, "properties");
  struct cudaDeviceProp p;
  check_cuda(L, cudaGetDeviceProperties(&p, i), "properties", "cudaGetDeviceProperties");
  static const struct {
    const char *key;
    enum cudaDeviceAttr attr;
  } attrs[] = {{"major", cudaDevAttrComputeCapabilityMajor},
               {"minor", cudaDevAttrComputeCapabilityMinor},
               {"sm_count", cudaDevAttrMultiProcessorCount},
               {"clock_khz", cudaDevAttrClockRate},
               {"memory_clock_khz", cudaDevAttrMemoryClockRate},
               {"bus_width_bits", cudaDevAttrGlobalMemoryBusWidth}};
  lua_createtable(L, 0, 8);
  lua_pushstring(L, p.name);
  lua_setfield(L, -2, "name");
  lua_pushinteger(L, (lua_Integer)p.totalGlobalMem);
  lua_setfield(L, -2, "total_memory");
  for (size_t k = 0; k < sizeof attrs / sizeof attrs[0]; k++) {
    int v = 0;
    check_cuda(L, cudaDeviceGetAttribute(&v, attrs[k].attr, i), "properties",
               "cudaDeviceGetAttribute");
    lua_pushinteger(L, v);
    lua_setfield(L, -2, attrs[k].key);
  }
  return 1;
}

/** synchronize(i): waits for everything queued on device i (default 0). */
static int l_synchronize(lua_State *L) {
  int i = device_arg(L, "synchronize");
  check_cuda(L, cudaSetDevice(i), "synchronize", "cudaSetDevice");
  check_cuda(L, cudaDeviceSynchronize(), "synchronize", "cudaDeviceSynchronize");
  return 0;
}

int luaopen_dle_cuda_info(lua_State *L) {
  static const luaL_Reg fns[] = {{"count", l_count},
                                 {"properties", l_properties},
                                 {"synchronize", l_synchronize},
                                 {NULL, NULL}};
  luaL_newlib(L, fns);
  return 1;
}
