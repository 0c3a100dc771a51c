// Device discovery: the one-device list, names, GUID, index, and reading sysfs attributes.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "abi/identity.h"
#include "abi/objects.h"

using namespace vrnic::abi;

#ifdef ibv_get_device_list
#undef ibv_get_device_list
#endif

VRNIC_EXPORT ibv_device** ibv_get_device_list(int* num_devices) {
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  if (!list) return fail_null<ibv_device*>(ENOMEM);
  list[0] = the_device();
  if (num_devices) *num_devices = 1;
  return list;
}

VRNIC_EXPORT void ibv_free_device_list(ibv_device** list) { std::free(list); }

VRNIC_EXPORT const char* ibv_get_device_name(ibv_device* device) {
  return device ? device->name : nullptr;
}

VRNIC_EXPORT int ibv_get_device_index(ibv_device* device) { return device ? 0 : -1; }

// As a kernel device's sysfs node_guid, the GUID is known before the device is opened: the
// one of the address the device has, or would take if opened now.
VRNIC_EXPORT __be64 ibv_get_device_guid(ibv_device* device) {
  vrnic::engine::Gid gid;
  return expected_gid(gid) ? guid_from_gid(gid.raw.data()) : 0;
}

VRNIC_EXPORT const char* ibv_get_sysfs_path() {
  const char* env = std::getenv("SYSFS_PATH");
  return env && *env ? env : "/sys";
}

// Reads a sysfs attribute without its trailing newline; returns its length or -1.
VRNIC_EXPORT int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  if (!dir || !file || !buf || size == 0) {
    errno = EINVAL;
    return -1;
  }
  char path[512];
  std::snprintf(path, sizeof(path), "%s/%s", dir, file);
  FILE* f = std::fopen(path, "re");
  // Without `vrnic run`'s sysfs view the device's directory does not exist: its fixed
  // attributes are answered here.
  if (!f && !std::strcmp(dir, kIbdevPath)) {
    std::string value;
    if (!vrnic::live::fixed_sysfs_attr(file, value)) {
      errno = ENOENT;
      return -1;
    }
    return std::snprintf(buf, size, "%s", value.c_str()) >= int(size) ? int(size) - 1
                                                                       : int(value.size());
  }
  if (!f) return -1;
  size_t n = std::fread(buf, 1, size - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  if (n > 0 && buf[n - 1] == '\n') buf[--n] = '\0';
  return int(n);
}
