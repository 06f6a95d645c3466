/* A check of the IA Simulated Metal Device (a test fixture, not Apple Metal) from Objective-C itself: messages
 * sent by the compiler (gcc's GNU-runtime code: objc_msg_lookup, then the IMP), from several threads at once.
 * Built and run by tests/test_metal_sim.py; prints one "ok ..." line and exits 0, or names what failed and exits 1.
 *
 *   check_sim THREADS ROUNDS
 *
 * Each thread runs ROUNDS rounds of: device, buffers, queue, library, pipeline, command buffer, vector_add,
 * commit, wait, check, release; pairs of threads also order work across their queues with a shared event.
 * At the end no object of the simulator may be live and no message may have reached a deallocated one. */

#import <Foundation/Foundation.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct { NSUInteger width, height, depth; } MTLSize;

/* The selectors used here, with their prototypes (Apple's documentation); the simulator's classes answer them. */
@protocol IASimMetalCalls <NSObject>
- (NSString *)name;
- (MTLSize)maxThreadsPerThreadgroup;
- (id)newBufferWithLength:(NSUInteger)length options:(NSUInteger)options;
- (void *)contents;
- (id)newCommandQueue;
- (id)newSharedEvent;
- (uint64_t)signaledValue;
- (id)newLibraryWithSource:(NSString *)source options:(id)options error:(NSError **)error;
- (id)newFunctionWithName:(NSString *)name;
- (id)newComputePipelineStateWithFunction:(id)function error:(NSError **)error;
- (id)commandBuffer;
- (id)computeCommandEncoder;
- (void)setComputePipelineState:(id)state;
- (void)setBuffer:(id)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index;
- (void)setBytes:(const void *)bytes length:(NSUInteger)length atIndex:(NSUInteger)index;
- (void)dispatchThreads:(MTLSize)threadsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
- (void)endEncoding;
- (void)encodeSignalEvent:(id)event value:(uint64_t)value;
- (void)encodeWaitForEvent:(id)event value:(uint64_t)value;
- (void)commit;
- (void)waitUntilCompleted;
- (NSUInteger)status;
@end

id MTLCreateSystemDefaultDevice(void);
long ia_metal_sim_live_objects(const char *class_name);
long ia_metal_sim_zombie_messages(void);

static const char *kSource =
    "kernel void vector_add(device const float *a [[buffer(0)]], device const float *b [[buffer(1)]],\n"
    "                       device float *c [[buffer(2)]], constant uint &n [[buffer(3)]],\n"
    "                       uint i [[thread_position_in_grid]]) { if (i < n) c[i] = a[i] + b[i]; }\n";

enum { N = 256 };
static int g_rounds;
static int g_failures;
static id<IASimMetalCalls> g_events[65]; /* one per pair of threads, and the warm-up's */

static void fail(const char *what, int thread, int round)
{
    fprintf(stderr, "check_sim: thread %d round %d: %s\n", thread, round, what);
    __atomic_add_fetch(&g_failures, 1, __ATOMIC_SEQ_CST);
}

static void rounds(int t)
{
    for (int r = 0; r < g_rounds && !__atomic_load_n(&g_failures, __ATOMIC_SEQ_CST); ++r) {
        NSAutoreleasePool *pool = [[NSAutoreleasePool alloc] init];
        id<IASimMetalCalls> dev = MTLCreateSystemDefaultDevice();
        MTLSize m = [dev maxThreadsPerThreadgroup];
        if (m.width != 1024 || m.height != 1024 || m.depth != 1024)
            fail("maxThreadsPerThreadgroup", t, r);
        id<IASimMetalCalls> bufs[3];
        for (int i = 0; i < 3; ++i)
            bufs[i] = [dev newBufferWithLength:N * sizeof(float) options:0];
        float *a = [bufs[0] contents], *b = [bufs[1] contents], *c = [bufs[2] contents];
        for (int i = 0; i < N; ++i) {
            a[i] = (float)(t * 1000 + i);
            b[i] = (float)r;
        }
        id<IASimMetalCalls> queue = [dev newCommandQueue];
        NSError *err = nil;
        id<IASimMetalCalls> lib = [dev newLibraryWithSource:[NSString stringWithUTF8String:kSource] options:nil
                                                      error:&err];
        id<IASimMetalCalls> fn = [lib newFunctionWithName:@"vector_add"];
        id<IASimMetalCalls> pso = [dev newComputePipelineStateWithFunction:fn error:&err];
        if (lib == nil || fn == nil || pso == nil || err != nil)
            fail("library, function or pipeline", t, r);

        id<IASimMetalCalls> event = g_events[t / 2];
        uint64_t tick = (uint64_t)r + 1;
        id<IASimMetalCalls> cb = [queue commandBuffer];
        if (t % 2 == 1) /* the odd thread of a pair runs round r after its partner's round r */
            [cb encodeWaitForEvent:event value:tick];
        id<IASimMetalCalls> enc = [cb computeCommandEncoder];
        [enc setComputePipelineState:pso];
        for (int i = 0; i < 3; ++i)
            [enc setBuffer:bufs[i] offset:0 atIndex:(NSUInteger)i];
        uint32_t n = N;
        [enc setBytes:&n length:sizeof n atIndex:3];
        MTLSize grid = {N, 1, 1}, group = {64, 1, 1};
        [enc dispatchThreads:grid threadsPerThreadgroup:group];
        [enc endEncoding];
        if (t % 2 == 0)
            [cb encodeSignalEvent:event value:tick];
        [cb commit];
        [cb waitUntilCompleted];
        if ([cb status] != 4)
            fail("command buffer did not complete", t, r);
        if (t % 2 == 1 && [event signaledValue] < tick)
            fail("ran before its partner signalled", t, r);
        for (int i = 0; i < N; ++i)
            if (c[i] != a[i] + b[i]) {
                fail("vector_add result", t, r);
                break;
            }
        [pso release];
        [fn release];
        [lib release];
        [queue release];
        for (int i = 0; i < 3; ++i)
            [bufs[i] release];
        [dev release];
        [pool release];
    }
}

static void *run(void *arg)
{
    GSRegisterCurrentThread();
    rounds((int)(intptr_t)arg);
    GSUnregisterCurrentThread();
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    g_rounds = argc > 2 ? atoi(argv[2]) : 500;
    if (threads < 1 || threads > 128 || g_rounds < 1) {
        fprintf(stderr, "usage: check_sim THREADS(1..128) ROUNDS\n");
        return 2;
    }
    NSAutoreleasePool *pool = [[NSAutoreleasePool alloc] init];
    id<IASimMetalCalls> dev = MTLCreateSystemDefaultDevice();
    if (![[dev name] isEqualToString:@"IA Simulated Metal Device"]) {
        fprintf(stderr, "check_sim: not the simulated device\n");
        return 1;
    }
    int pairs = (threads + 1) / 2;
    for (int p = 0; p <= pairs; ++p) /* one more: the warm-up's */
        g_events[p] = [dev newSharedEvent];
    [dev release];
    /* One warm-up round on this thread first.  gcc's GNU runtime (libobjc.so.4) installs a class's dispatch table on
     * its first message and races that install against a message sent to the same class from another thread: seen
     * as SIGSEGV in objc_msg_lookup while another thread was in sarray_at_put under class_respondsToSelector (first
     * [[NSMutableArray alloc] init] from two threads), about one run in three at 8 threads.  Once every class used
     * has its table the threads only read them.  The warm-up is an even "thread" of its own pair, so it signals an
     * event no one waits for. */
    int n_rounds = g_rounds;
    g_rounds = 1;
    rounds(2 * pairs);
    g_rounds = n_rounds;
    pthread_t tid[128];
    for (int t = 0; t < threads; ++t)
        pthread_create(&tid[t], NULL, run, (void *)(intptr_t)t);
    for (int t = 0; t < threads; ++t)
        pthread_join(tid[t], NULL);
    for (int p = 0; p <= pairs; ++p)
        [g_events[p] release];
    [pool release];
    long live = ia_metal_sim_live_objects(NULL), zombies = ia_metal_sim_zombie_messages();
    if (g_failures || live || zombies) {
        fprintf(stderr, "check_sim: %d failures, %ld objects live, %ld messages to deallocated objects\n",
                g_failures, live, zombies);
        return 1;
    }
    printf("ok threads=%d rounds=%d live=%ld zombie_messages=%ld\n", threads, g_rounds, live, zombies);
    return 0;
}
