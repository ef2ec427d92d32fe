#include "loader/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace qrt {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

// Closes a descriptor on every exit path of open().
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path) {
  if (path.empty()) return invalid_argument("cannot map a file with an empty path");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string msg = "cannot open '" + path + "': " + errno_text(err);
    return err == ENOENT ? not_found(msg) : io_error(msg);
  }
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return io_error("cannot stat '" + path + "': " + errno_text(errno));
  if (S_ISDIR(st.st_mode)) return invalid_argument("'" + path + "' is a directory, expected a file");
  if (!S_ISREG(st.st_mode)) return invalid_argument("'" + path + "' is not a regular file");
  if (st.st_size < 0) return io_error("'" + path + "' reports a negative size");

  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<uint64_t>(st.st_size);
  if (f.size_ == 0) return f;  // mmap refuses length 0; an empty file is an empty view
  if (f.size_ > static_cast<uint64_t>(SIZE_MAX))
    return io_error("'" + path + "' (" + std::to_string(f.size_) + " bytes) is too large to map");
  void* p = ::mmap(nullptr, static_cast<size_t>(f.size_), PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) return io_error("cannot map '" + path + "': " + errno_text(errno));
  f.data_ = static_cast<const uint8_t*>(p);
  return f;
}

Result<std::shared_ptr<const MappedFile>> MappedFile::open_shared(const std::string& path) {
  QRT_ASSIGN_OR_RETURN(MappedFile f, open(path));
  return std::shared_ptr<const MappedFile>(std::make_shared<MappedFile>(std::move(f)));
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

Result<ByteSpan> MappedFile::span(uint64_t offset, uint64_t size) const {
  return sub_span(bytes(), offset, size, "file '" + path_ + "'");
}

Result<ByteSpan> sub_span(ByteSpan whole, uint64_t offset, uint64_t size, const std::string& what) {
  // offset + size may overflow; compare against what is left instead.
  if (offset > whole.size || size > whole.size - offset)
    return out_of_range("bytes [" + std::to_string(offset) + ", " + std::to_string(offset) + " + " +
                        std::to_string(size) + ") lie outside " + what + " of " + std::to_string(whole.size) +
                        " bytes");
  return ByteSpan{whole.data == nullptr ? nullptr : whole.data + offset, size};
}

}  // namespace qrt
