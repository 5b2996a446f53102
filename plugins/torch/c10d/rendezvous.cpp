// Rendezvous through the Store (rendezvous.hpp).
//
// Rank 0's address: the first of these that it can bind: MASTER_ADDR
// (set by torchrun and by init_method="env://": the host that runs the
// store, rank 0's host under torchrun's static rendezvous), the address
// of this host's name, and 127.0.0.1 (one host). Its port: one the kernel
// hands out for a socket bound to port 0, released just before the
// library binds it again (SO_REUSEADDR on both); a port taken in between
// makes tnt_comm_init on rank 0 fail with a clear error rather than hang.
#include "rendezvous.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace tnt_torch {

namespace {

const char kAddrKey[] = "tnt/root_addr";
const char kKeyKey[] = "tnt/job_key";

// IPv4 address of `host`, or "" if it has none.
std::string resolve(const char* host)
{
    struct addrinfo hints = {}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, nullptr, &hints, &res) != 0 || !res)
        return "";
    char ip[INET_ADDRSTRLEN] = "";
    inet_ntop(AF_INET,
              &reinterpret_cast<struct sockaddr_in*>(res->ai_addr)->sin_addr,
              ip, sizeof(ip));
    freeaddrinfo(res);
    return ip;
}

// A free port on ip, or 0 if ip is not an address of this host.
int free_port(const std::string& ip)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {};
    sa.sin_family = AF_INET;
    socklen_t len = sizeof(sa);
    int port = 0;
    if (inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) == 1 &&
        bind(fd, reinterpret_cast<struct sockaddr*>(&sa), sizeof(sa)) == 0 &&
        getsockname(fd, reinterpret_cast<struct sockaddr*>(&sa), &len) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

std::string root_address()
{
    std::vector<std::string> candidates;
    if (const char* m = std::getenv("MASTER_ADDR"))
        candidates.push_back(resolve(m));
    char host[256] = "";
    if (gethostname(host, sizeof(host) - 1) == 0)
        candidates.push_back(resolve(host));
    candidates.push_back("127.0.0.1");
    for (const std::string& ip : candidates) {
        if (ip.empty())
            continue;
        if (int port = free_port(ip))
            return ip + ":" + std::to_string(port);
    }
    throw std::runtime_error("tnt: rank 0 found no address to listen on "
                             "(MASTER_ADDR, this host's name, 127.0.0.1)");
}

std::string random_key()
{
    unsigned char b[16];
    std::ifstream in("/dev/urandom", std::ios::binary);
    if (!in.read(reinterpret_cast<char*>(b), sizeof(b)))
        throw std::runtime_error("tnt: cannot read /dev/urandom for the "
                                 "process group's job key");
    char hex[2 * sizeof(b) + 1];
    for (size_t i = 0; i < sizeof(b); i++)
        std::snprintf(hex + 2 * i, 3, "%02x", b[i]);
    return hex;
}

std::string text(const std::vector<uint8_t>& v)
{
    return std::string(v.begin(), v.end());
}

std::vector<uint8_t> bytes(const std::string& s)
{
    return std::vector<uint8_t>(s.begin(), s.end());
}

}  // namespace

Rendezvous rendezvous(c10d::Store& store, int rank)
{
    Rendezvous r;
    if (rank == 0) {
        r.root_addr = root_address();
        r.job_key = random_key();
        store.set(kKeyKey, bytes(r.job_key));
        store.set(kAddrKey, bytes(r.root_addr));  // last: readers wait on it
    } else {
        r.root_addr = text(store.get(kAddrKey));
        r.job_key = text(store.get(kKeyKey));
    }
    return r;
}

}  // namespace tnt_torch
