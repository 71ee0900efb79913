#include "core/elf_check.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/scoped_fd.h"

namespace dist {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
#elif defined(__powerpc64__)
constexpr uint16_t kMachine = EM_PPC64;
#elif defined(__riscv)
constexpr uint16_t kMachine = EM_RISCV;
#else
#error "elf_check.cc: add this machine's EM_* value"
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr unsigned char kData = ELFDATA2LSB;
#else
constexpr unsigned char kData = ELFDATA2MSB;
#endif

static_assert(sizeof(void*) == 8, "elf_check.cc reads 64-bit ELF only");

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::FailedPreconditionError(
      absl::StrCat(path, ": not a complete ELF shared object for this machine (", what,
                   "); reinstall or rebuild the plugin"));
}

bool ReadAt(int fd, void* out, size_t size, uint64_t offset) {
  auto* bytes = static_cast<char*>(out);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pread(fd, bytes + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Whether [offset, offset + size) lies inside a file of `file_size` bytes.
bool Within(uint64_t offset, uint64_t size, uint64_t file_size) {
  return offset <= file_size && size <= file_size - offset;
}

}  // namespace

absl::Status CheckElfSharedObject(const std::string& path) {
  // O_NONBLOCK: opening a FIFO found where a plugin should be would wait
  // for a writer; it is refused below as not a regular file.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": cannot open: ", std::strerror(errno),
                                                      "; check the path and its permissions"));
  }
  const ScopedFd closer(fd);
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return Bad(path, "not a regular file");
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  Elf64_Ehdr header;
  if (file_size < sizeof(header) || !ReadAt(fd, &header, sizeof(header), 0)) {
    return Bad(path, absl::StrCat("file is ", file_size, " bytes, shorter than an ELF header"));
  }
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) return Bad(path, "no ELF magic");
  if (header.e_ident[EI_CLASS] != ELFCLASS64) return Bad(path, "not 64-bit");
  if (header.e_ident[EI_DATA] != kData) return Bad(path, "wrong byte order");
  if (header.e_type != ET_DYN) return Bad(path, "not a shared object (ELF type is not ET_DYN)");
  if (header.e_machine != kMachine) {
    return Bad(
        path, absl::StrCat("built for ELF machine ", header.e_machine, ", this one is ", kMachine));
  }
  if (header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phnum == 0) {
    return Bad(path, "no usable program headers");
  }
  const uint64_t headers_size = uint64_t{header.e_phnum} * sizeof(Elf64_Phdr);
  if (!Within(header.e_phoff, headers_size, file_size)) {
    return Bad(path, absl::StrCat("program headers end past the file's ", file_size,
                                  " bytes: the file is truncated"));
  }
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  if (!ReadAt(fd, segments.data(), headers_size, header.e_phoff)) {
    return Bad(path, "cannot read its program headers");
  }
  for (const Elf64_Phdr& segment : segments) {
    if ((segment.p_type == PT_LOAD || segment.p_type == PT_DYNAMIC) &&
        !Within(segment.p_offset, segment.p_filesz, file_size)) {
      return Bad(path,
                 absl::StrCat("a segment ends at byte ", segment.p_offset + segment.p_filesz,
                              ", past the file's ", file_size, " bytes: the file is truncated"));
    }
  }
  if (header.e_shnum != 0 &&
      !Within(header.e_shoff, uint64_t{header.e_shnum} * header.e_shentsize, file_size)) {
    return Bad(path, absl::StrCat("section headers end past the file's ", file_size,
                                  " bytes: the file is truncated"));
  }
  return absl::OkStatus();
}

}  // namespace dist
