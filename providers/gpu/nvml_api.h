// The few NVML types and entry points berth uses, declared here from NVIDIA's published nvml.h
// (NVML API reference, "Device Structs" and "Device Queries") so that berth builds without any
// NVIDIA package. The real library is opened at run time (nvml_probe.cc); the fake one in
// tests/fake_nvml/ implements these same signatures. Layouts and values must match nvml.h
// exactly: they are an ABI, not a choice.
#pragma once

#include <cstdint>

namespace berth::nvml {

/// nvmlReturn_t: a C enum, passed as int.
using Return = int;
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorLibraryNotFound = 12;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorLibRmVersionMismatch = 18;
inline constexpr Return kErrorArgumentVersionMismatch = 25;
inline constexpr Return kErrorUnknown = 999;

/// nvmlDevice_t: an opaque handle.
struct DeviceSt;
using Device = DeviceSt*;

/// NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_DEVICE_NAME_V2_BUFFER_SIZE.
inline constexpr unsigned kUuidBufferSize = 96;
inline constexpr unsigned kNameBufferSize = 96;

/// NVML_VALUE_NOT_AVAILABLE: usedGpuMemory when the driver cannot say (Windows WDDM, some
/// containers, MIG without privileges).
inline constexpr unsigned long long kValueNotAvailable = ~0ULL;  // NOLINT(runtime/int)

/// nvmlMemory_t (nvmlDeviceGetMemoryInfo): used = total - free, reserved memory counted as used.
struct Memory {
  unsigned long long total;  // NOLINT(runtime/int)
  unsigned long long free;   // NOLINT(runtime/int)
  unsigned long long used;   // NOLINT(runtime/int)
};

/// nvmlMemory_v2_t (nvmlDeviceGetMemoryInfo_v2): used excludes what the driver reserves.
struct MemoryV2 {
  unsigned int version;         // must be kMemoryV2Version
  unsigned long long total;     // NOLINT(runtime/int)
  unsigned long long reserved;  // NOLINT(runtime/int)
  unsigned long long free;      // NOLINT(runtime/int)
  unsigned long long used;      // NOLINT(runtime/int)
};

/// NVML_STRUCT_VERSION(Memory, 2) = sizeof(nvmlMemory_v2_t) | (2 << 24).
inline constexpr unsigned int kMemoryV2Version =
    static_cast<unsigned int>(sizeof(MemoryV2)) | (2U << 24U);

/// nvmlProcessInfo_v1_t: nvmlDeviceGetComputeRunningProcesses (unversioned, before CUDA 11.2).
struct ProcessInfoV1 {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // NOLINT(runtime/int) bytes or kValueNotAvailable
};

/// nvmlProcessInfo_v2_t and nvmlProcessInfo_t: the _v2 and _v3 calls (same layout).
struct ProcessInfoV2 {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // NOLINT(runtime/int) bytes or kValueNotAvailable
  unsigned int gpuInstanceId;        // MIG only; 0xFFFFFFFF otherwise
  unsigned int computeInstanceId;
};

static_assert(sizeof(Memory) == 24);
static_assert(sizeof(MemoryV2) == 40 && kMemoryV2Version == 0x02000028U);
static_assert(sizeof(ProcessInfoV1) == 16);
static_assert(sizeof(ProcessInfoV2) == 24);

// Entry points, by the symbol name looked up with dlsym.
using InitFn = Return (*)();                                         // nvmlInit_v2
using ShutdownFn = Return (*)();                                     // nvmlShutdown
using ErrorStringFn = const char* (*)(Return);                       // nvmlErrorString
using DeviceGetCountFn = Return (*)(unsigned int*);                  // nvmlDeviceGetCount_v2
using DeviceGetHandleByIndexFn = Return (*)(unsigned int, Device*);  // ..._v2
using DeviceGetStringFn = Return (*)(Device, char*, unsigned int);   // GetUUID, GetName
using DeviceGetMemoryInfoFn = Return (*)(Device, Memory*);           // GetMemoryInfo
using DeviceGetMemoryInfoV2Fn = Return (*)(Device, MemoryV2*);       // GetMemoryInfo_v2
using GetProcessesV1Fn = Return (*)(Device, unsigned int*, ProcessInfoV1*);
using GetProcessesV2Fn = Return (*)(Device, unsigned int*, ProcessInfoV2*);  // _v2 and _v3

}  // namespace berth::nvml
