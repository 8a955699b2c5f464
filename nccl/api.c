#include "api.h"

#include <stdio.h>
#include <string.h>

/* The layouts NCCL 2.30 reads for version EP_NCCL_LAYOUT_VERSION (LP64). */
_Static_assert(offsetof(ep_nccl_config, blocking) == 16, "blocking offset");
_Static_assert(offsetof(ep_nccl_config, netName) == 32, "netName offset");
_Static_assert(offsetof(ep_nccl_config, commName) == 48, "commName offset");
_Static_assert(offsetof(ep_nccl_config, collnetEnable) == 56, "collnetEnable offset");
_Static_assert(offsetof(ep_nccl_config, graphStreamOrdering) == 92, "graphStreamOrdering offset");
_Static_assert(sizeof(ep_nccl_config) == 96, "config size");
_Static_assert(offsetof(ep_nccl_comm_properties, magic) == 8, "magic offset");
_Static_assert(offsetof(ep_nccl_comm_properties, rank) == 16, "rank offset");
_Static_assert(offsetof(ep_nccl_comm_properties, deviceApiSupport) == 32, "deviceApiSupport offset");
_Static_assert(offsetof(ep_nccl_comm_properties, ginType) == 36, "ginType offset");
_Static_assert(offsetof(ep_nccl_comm_properties, hostRmaSupport) == 44, "hostRmaSupport offset");
_Static_assert(offsetof(ep_nccl_comm_properties, railedGinType) == 48, "railedGinType offset");
_Static_assert(sizeof(ep_nccl_comm_properties) == 56, "properties size");
_Static_assert(sizeof(ep_nccl_unique_id) == EP_NCCL_UNIQUE_ID_BYTES, "unique id size");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, version) == 12, "requirements version offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, resourceRequirementsList) == 16, "resourceRequirementsList offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, teamRequirementsList) == 24, "teamRequirementsList offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, lsaMultimem) == 32, "lsaMultimem offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, barrierCount) == 36, "barrierCount offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, lsaLLA2ASlotCount) == 52, "lsaLLA2ASlotCount offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, ginForceEnable) == 56, "ginForceEnable offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, ginContextCount) == 60, "ginContextCount offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, ginSignalCount) == 64, "ginSignalCount offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, ginCounterCount) == 68, "ginCounterCount offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, ginConnectionType) == 72, "ginConnectionType offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, ginExclusiveContexts) == 76, "ginExclusiveContexts offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, ginQueueDepth) == 80, "ginQueueDepth offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, ginTrafficClass) == 84, "ginTrafficClass offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, worldGinBarrierCount) == 88, "worldGinBarrierCount offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, ginStrongSignalsRequired) == 92, "ginStrongSignalsRequired offset");
_Static_assert(offsetof(ep_nccl_dev_comm_requirements, ginVaSignalsRequired) == 93, "ginVaSignalsRequired offset");
_Static_assert(sizeof(ep_nccl_dev_comm_requirements) == 96, "requirements size");
_Static_assert(EP_NCCL_DEV_COMM_SCRATCH >= EP_NCCL_DEV_COMM_BYTES, "device communicator scratch");

typedef int (*get_version_fn)(int*);
typedef const char* (*get_error_string_fn)(int);
typedef const char* (*get_last_error_fn)(void*);
typedef int (*get_unique_id_fn)(ep_nccl_unique_id*);
typedef int (*comm_init_rank_config_fn)(void**, int, ep_nccl_unique_id, int, ep_nccl_config*);
typedef int (*comm_get_async_error_fn)(void*, int*);
typedef int (*comm_fn)(void*);
typedef int (*comm_query_properties_fn)(void*, ep_nccl_comm_properties*);
typedef int (*mem_alloc_fn)(void**, size_t);
typedef int (*mem_free_fn)(void*);
typedef int (*window_register_fn)(void*, void*, size_t, void**, int);
typedef int (*window_deregister_fn)(void*, void*);
typedef int (*peer_device_pointer_fn)(void*, size_t, int, void**);
typedef int (*dev_comm_create_fn)(void*, const ep_nccl_dev_comm_requirements*, void*);
typedef int (*dev_comm_destroy_fn)(void*, const void*);

/* finish copies the library's last error for comm (NULL: the thread's) into
 * last when rc is a failure, and passes rc on. */
static int finish(const ep_nccl_api* api, void* comm, int rc, char* last, size_t last_len) {
    if (last_len == 0) return rc;
    last[0] = 0;
    if (rc == EP_NCCL_SUCCESS || rc == EP_NCCL_IN_PROGRESS || api->get_last_error == NULL) return rc;
    const char* msg = ((get_last_error_fn)api->get_last_error)(comm);
    if (msg != NULL) snprintf(last, last_len, "%s", msg);
    return rc;
}

int ep_nccl_get_version(void* fn, int* version) {
    return ((get_version_fn)fn)(version);
}

const char* ep_nccl_error_string(const ep_nccl_api* api, int code) {
    if (api->get_error_string == NULL) return NULL;
    return ((get_error_string_fn)api->get_error_string)(code);
}

int ep_nccl_get_unique_id(const ep_nccl_api* api, char* id, char* last, size_t last_len) {
    ep_nccl_unique_id u;
    memset(&u, 0, sizeof u);
    int rc = ((get_unique_id_fn)api->get_unique_id)(&u);
    if (rc == EP_NCCL_SUCCESS) memcpy(id, u.internal, sizeof u.internal);
    return finish(api, NULL, rc, last, last_len);
}

int ep_nccl_comm_init_rank_config(const ep_nccl_api* api, void** comm, int nranks, const char* id, int rank,
                                  unsigned int version, char* last, size_t last_len) {
    ep_nccl_unique_id u;
    memcpy(u.internal, id, sizeof u.internal);
    /* NCCL copies the config during the call. */
    ep_nccl_config config = {
        .size = sizeof config,
        .magic = EP_NCCL_API_MAGIC,
        .version = version,
        .blocking = 0,
        .cgaClusterSize = EP_NCCL_CONFIG_UNDEF_INT,
        .minCTAs = EP_NCCL_CONFIG_UNDEF_INT,
        .maxCTAs = EP_NCCL_CONFIG_UNDEF_INT,
        .netName = NULL,
        .splitShare = EP_NCCL_CONFIG_UNDEF_INT,
        .trafficClass = EP_NCCL_CONFIG_UNDEF_INT,
        .commName = NULL,
        .collnetEnable = EP_NCCL_CONFIG_UNDEF_INT,
        .CTAPolicy = EP_NCCL_CONFIG_UNDEF_INT,
        .shrinkShare = EP_NCCL_CONFIG_UNDEF_INT,
        .nvlsCTAs = EP_NCCL_CONFIG_UNDEF_INT,
        .nChannelsPerNetPeer = EP_NCCL_CONFIG_UNDEF_INT,
        .nvlinkCentricSched = EP_NCCL_CONFIG_UNDEF_INT,
        .graphUsageMode = EP_NCCL_CONFIG_UNDEF_INT,
        .numRmaCtx = EP_NCCL_CONFIG_UNDEF_INT,
        .maxP2pPeers = EP_NCCL_CONFIG_UNDEF_INT,
        .graphStreamOrdering = EP_NCCL_CONFIG_UNDEF_INT,
    };
    *comm = NULL;
    int rc = ((comm_init_rank_config_fn)api->comm_init_rank_config)(comm, nranks, u, rank, &config);
    /* The error of an init that failed at once is the thread's. */
    return finish(api, NULL, rc, last, last_len);
}

int ep_nccl_comm_get_async_error(const ep_nccl_api* api, void* comm, int* state, char* last, size_t last_len) {
    *state = EP_NCCL_IN_PROGRESS;
    int rc = ((comm_get_async_error_fn)api->comm_get_async_error)(comm, state);
    if (rc != EP_NCCL_SUCCESS) return finish(api, comm, rc, last, last_len);
    /* The text of the operation's failure, if it failed. */
    (void)finish(api, comm, *state, last, last_len);
    return rc;
}

int ep_nccl_comm_finalize(const ep_nccl_api* api, void* comm, char* last, size_t last_len) {
    return finish(api, comm, ((comm_fn)api->comm_finalize)(comm), last, last_len);
}

int ep_nccl_comm_destroy(const ep_nccl_api* api, void* comm, char* last, size_t last_len) {
    int rc = ((comm_fn)api->comm_destroy)(comm);
    /* After a destroy the handle may be gone: ask for the thread's error. */
    return finish(api, NULL, rc, last, last_len);
}

int ep_nccl_comm_abort(const ep_nccl_api* api, void* comm, char* last, size_t last_len) {
    int rc = ((comm_fn)api->comm_abort)(comm);
    return finish(api, NULL, rc, last, last_len);
}

int ep_nccl_comm_query_properties(const ep_nccl_api* api, void* comm, unsigned int version,
                                  ep_nccl_comm_properties* out, char* last, size_t last_len) {
    /* Slack after the struct, in case a library writes fields of a later
     * layout than the version asked for. */
    struct {
        ep_nccl_comm_properties props;
        char slack[1024];
    } buf;
    memset(&buf, 0, sizeof buf);
    buf.props.size = sizeof(ep_nccl_comm_properties);
    buf.props.magic = EP_NCCL_API_MAGIC;
    buf.props.version = version;
    int rc = ((comm_query_properties_fn)api->comm_query_properties)(comm, &buf.props);
    if (rc == EP_NCCL_SUCCESS) *out = buf.props;
    return finish(api, comm, rc, last, last_len);
}

int ep_nccl_mem_alloc(const ep_nccl_api* api, uint64_t* ptr, size_t size, char* last, size_t last_len) {
    void* p = NULL;
    int rc = ((mem_alloc_fn)api->mem_alloc)(&p, size);
    *ptr = rc == EP_NCCL_SUCCESS ? (uint64_t)(uintptr_t)p : 0;
    return finish(api, NULL, rc, last, last_len);
}

int ep_nccl_mem_free(const ep_nccl_api* api, uint64_t ptr, char* last, size_t last_len) {
    int rc = ((mem_free_fn)api->mem_free)((void*)(uintptr_t)ptr);
    return finish(api, NULL, rc, last, last_len);
}

int ep_nccl_window_register(const ep_nccl_api* api, void* comm, uint64_t buff, size_t size, int flags,
                            void** win, char* last, size_t last_len) {
    *win = NULL;
    int rc = ((window_register_fn)api->window_register)(comm, (void*)(uintptr_t)buff, size, win, flags);
    return finish(api, comm, rc, last, last_len);
}

int ep_nccl_window_deregister(const ep_nccl_api* api, void* comm, void* win, char* last, size_t last_len) {
    int rc = ((window_deregister_fn)api->window_deregister)(comm, win);
    return finish(api, comm, rc, last, last_len);
}

int ep_nccl_peer_device_pointer(const ep_nccl_api* api, void* win, size_t offset, int peer, uint64_t* ptr,
                                char* last, size_t last_len) {
    void* p = NULL;
    int rc = ((peer_device_pointer_fn)api->peer_device_pointer)(win, offset, peer, &p);
    *ptr = rc == EP_NCCL_SUCCESS ? (uint64_t)(uintptr_t)p : 0;
    return finish(api, NULL, rc, last, last_len);
}

int ep_nccl_dev_comm_create(const ep_nccl_api* api, void* comm, int contexts, void* out, char* last, size_t last_len) {
    /* NCCL's initializer of the requirements (nothing asked for, traffic
     * class left to NCCL, strong and window signals required; the fields
     * not named are 0, NULL or false), but for GIN from every rank to every
     * rank with contexts contexts. */
    ep_nccl_dev_comm_requirements reqs = {
        .size = sizeof reqs,
        .magic = EP_NCCL_API_MAGIC,
        .version = EP_NCCL_DEVICE_VERSION,
        .ginContextCount = contexts,
        .ginConnectionType = EP_NCCL_GIN_CONNECTION_FULL,
        .ginTrafficClass = EP_NCCL_CONFIG_UNDEF_INT,
        .ginStrongSignalsRequired = true,
        .ginVaSignalsRequired = true,
    };
    memset(out, 0, EP_NCCL_DEV_COMM_SCRATCH);
    int rc = ((dev_comm_create_fn)api->dev_comm_create)(comm, &reqs, out);
    return finish(api, comm, rc, last, last_len);
}

int ep_nccl_dev_comm_destroy(const ep_nccl_api* api, void* comm, const void* dev, char* last, size_t last_len) {
    /* The bytes kept, padded like the buffer NCCL wrote them into. */
    char buf[EP_NCCL_DEV_COMM_SCRATCH];
    memset(buf, 0, sizeof buf);
    memcpy(buf, dev, EP_NCCL_DEV_COMM_BYTES);
    int rc = ((dev_comm_destroy_fn)api->dev_comm_destroy)(comm, buf);
    return finish(api, comm, rc, last, last_len);
}
