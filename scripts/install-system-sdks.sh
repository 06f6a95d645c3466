#!/usr/bin/env bash
# System SDKs from Debian's packages: OpenCL headers + the ICD loader + PoCL (runs kernels on the CPU),
# and HIP 5.2 (libamdhip64-dev: hip/hip_runtime_api.h and the real libamdhip64.so, which loads and
# reports no device here), and Objective-C: gcc's gobjc (the GNU runtime libobjc.so.4) and GNUstep Foundation
# (libgnustep-base-dev), which the objc resolver kind and specs/foundation run against; and Vulkan: the headers
# (libvulkan-dev: vulkan/vulkan_core.h, vk_video/) and the loader libvulkan.so.1, Mesa's lavapipe ICD
# (mesa-vulkan-drivers: Vulkan 1.3 on the CPU), the Khronos validation layer (vulkan-validationlayers, which the
# Vulkan tests enable) and glslangValidator (glslang-tools: GLSL compute shaders to SPIR-V); and Intel's Level Zero
# loader (libze-dev: level_zero/ze_api.h and libze_loader.so.1), which no spec binds but the scaffold's tests draft
# from (issue 29: its directions, wait-event arrays and stype structs).
# Installs only what is missing; needs root (CI and these machines run as root). Without root it
# says what to install and exits 0: those libraries are then skipped by `generate` and its tests skip.
set -euo pipefail
packages=(opencl-headers ocl-icd-opencl-dev ocl-icd-libopencl1 pocl-opencl-icd libamdhip64-dev gobjc libgnustep-base-dev
          libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers glslang-tools libze-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "system SDKs: all present (${packages[*]})"
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "system SDKs: missing ${missing[*]} (install them as root with apt-get); OpenCL, HIP, Foundation and Vulkan will be skipped"
    exit 0
fi
echo "system SDKs: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
