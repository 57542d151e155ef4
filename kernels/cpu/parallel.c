/* SPDX-License-Identifier: MIT */
/*
 * parallel.c: the CPU kernels' thread pool, and the OpenBLAS thread setting.
 *
 * Why not let OpenBLAS thread: measured on OpenBLAS 0.3.21 (Haswell kernels),
 * cblas_sgemm with 1 thread and with 2, 3, 4 or 8 threads gives different
 * bits. Its threaded driver splits the columns of C at thread boundaries that
 * need not be multiples of the micro-kernel's unroll, so edge columns take
 * another code path, and it blocks the inner dimension differently from the
 * serial driver. The kernels must give the same bits whatever the thread
 * count, so OpenBLAS is pinned to one thread, and the kernels split their
 * work into tasks whose boundaries depend on the tensor shapes only (blocks
 * of a GEMM's output, images of a batch, fixed groups of images whose
 * partial sums are added in group order). Which thread runs a task never
 * changes what it computes.
 *
 * DESIGN
 *
 * tide_cpu_kernels_set_threads(n) starts n - 1 worker threads; the thread
 * that calls a kernel is the n-th. Until it is called the kernels run on the
 * calling thread alone. tide__cpu_parallel publishes one job (a function and
 * a task count) under pool.lock, bumps pool.generation and wakes the
 * workers; every thread, the caller included, takes task numbers from an
 * atomic counter until none are left. A worker joins the job only while it
 * is open (pool.open), counting itself in pool.running; when the caller has
 * run out of tasks it closes the job and waits for the workers that joined
 * to finish theirs (pool.running reaches 0). A worker that wakes after the
 * job closed, because the machine is busy or the job was short, finds
 * nothing to do and goes back to sleep: the caller never waits for a thread
 * to be scheduled only to learn that it has no work. A worker that has
 * finished spins for up to SPIN_NS on pool.published (the generation, read
 * without the lock) before it sleeps on the condition, since the next job
 * usually follows within microseconds and a sleeping thread takes tens of
 * them to wake; the caller spins the same way for the workers' last tasks.
 * The spins yield the core every 64 pauses, so on a machine with more
 * runnable threads than cores they cost the other threads little. Measured
 * on the 2-core VM, MLP batch 64 at 2 threads, ms a step: idle machine 0.69
 * without spinning, 0.49-0.53 spinning with or without the yield; one core
 * taken by another process: 0.72-0.79 without spinning, 0.93-0.99 spinning
 * without the yield, 0.78-0.84 with it. One job runs at a
 * time: a kernel that finds the pool busy (pool.busy held by a kernel on
 * another executor thread) runs its tasks itself, which gives the same
 * result.
 *
 * Threads and state: pool.lock guards generation, open, running, stopping
 * and the published job, except job.next, which is atomic. Workers touch
 * only those fields and the tasks they take, and the job's only between
 * joining it and reporting back. pool.busy is held by the one caller whose
 * job is running, and by set_threads while it stops and starts workers, so
 * set_threads may be called at any time: it waits for a running job. The
 * worker count is atomic, since kernels read it to size their jobs without
 * taking a lock (a count that changes meanwhile only changes the speed).
 */
#include "kernels/cpu/cpu-impl.h"

#include <cblas.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

/* Most threads the pool runs, the caller included. */
#define MAX_THREADS 64
/*
 * How long a worker spins for the next job before it sleeps on the
 * condition: a sleeping thread takes tens of microseconds to wake (more on a
 * virtual machine), as long as a small GEMM block takes.
 */
#ifndef SPIN_NS
#define SPIN_NS 50000L
#endif

struct job {
    tide__cpu_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    int max_workers; /* workers with an id at or above this skip the job */
    atomic_int_fast64_t next;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t start; /* workers wait here for the next generation */
    pthread_cond_t done;  /* the caller waits here for running to reach 0 */
    pthread_mutex_t busy; /* held for the length of one job, or of set_threads */
    pthread_t threads[MAX_THREADS];
    atomic_int n_threads;      /* worker threads; the caller is one more */
    uint64_t generation;       /* bumped for every job */
    atomic_uint_fast64_t published; /* generation, for workers spinning without the lock */
    uint64_t first_generation; /* the generation when the current workers started */
    bool open;                 /* the current job takes workers (the caller has tasks left) */
    atomic_int running;        /* workers that joined the current job and have not finished
                                  (written under lock; read without it while the caller spins) */
    bool stopping;             /* set_threads is stopping the workers */
    struct job job;
} pool = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .start = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
    .busy = PTHREAD_MUTEX_INITIALIZER,
};

/* OpenBLAS's thread count at start-up (OPENBLAS_NUM_THREADS or the cores). */
static int startup_threads = 1;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_pin(void)
{
    startup_threads = openblas_get_num_threads();
    if (startup_threads < 1)
        startup_threads = 1;
    openblas_set_num_threads(1);
}

void tide__cpu_blas_init(void)
{
    pthread_once(&blas_once, blas_pin);
}

/* Runs tasks of job until there are none left. */
static void run_tasks(struct job *job, int worker)
{
    for (;;) {
        int64_t task = atomic_fetch_add(&job->next, 1);
        if (task >= job->n_tasks)
            return;
        job->fn(job->ctx, task, worker);
    }
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* What a spin waits out: a job not yet published after seen, or workers still running. */
static bool no_new_job(uint64_t seen)
{
    return atomic_load_explicit(&pool.published, memory_order_acquire) == seen;
}

static bool workers_running(uint64_t unused)
{
    (void)unused;
    return atomic_load(&pool.running) > 0;
}

/*
 * Spins, without the lock, while busy(arg) holds, for at most SPIN_NS; every
 * 64 pauses it yields the core, which on a busy machine another thread may want.
 */
static void spin_while(bool (*busy)(uint64_t), uint64_t arg)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 1; busy(arg); i++) {
        cpu_relax();
        if (i % 64 == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > SPIN_NS)
                return;
            sched_yield();
        }
    }
}

static void *worker_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    pthread_mutex_lock(&pool.lock);
    uint64_t seen = pool.first_generation;
    for (;;) {
        if (!pool.stopping && pool.generation == seen) {
            /* A job often follows within microseconds: waking from the condition costs more. */
            pthread_mutex_unlock(&pool.lock);
            spin_while(no_new_job, seen);
            pthread_mutex_lock(&pool.lock);
        }
        while (!pool.stopping && pool.generation == seen)
            pthread_cond_wait(&pool.start, &pool.lock);
        if (pool.stopping)
            break;
        seen = pool.generation;
        if (!pool.open || id >= pool.job.max_workers)
            continue; /* closed already, or not for this worker: sleep again */
        pool.running++;
        pthread_mutex_unlock(&pool.lock);
        run_tasks(&pool.job, id);
        pthread_mutex_lock(&pool.lock);
        if (--pool.running == 0 && !pool.open)
            pthread_cond_signal(&pool.done);
    }
    pthread_mutex_unlock(&pool.lock);
    return NULL;
}

int tide__cpu_workers(void)
{
    return atomic_load(&pool.n_threads) + 1;
}

void tide__cpu_parallel(int64_t n_tasks, int max_workers, tide__cpu_task_fn fn, void *ctx)
{
    if (n_tasks <= 0)
        return;
    if (n_tasks == 1 || max_workers <= 1 || pthread_mutex_trylock(&pool.busy) != 0) {
        for (int64_t t = 0; t < n_tasks; t++)
            fn(ctx, t, 0);
        return;
    }
    if (atomic_load(&pool.n_threads) == 0) {
        pthread_mutex_unlock(&pool.busy);
        for (int64_t t = 0; t < n_tasks; t++)
            fn(ctx, t, 0);
        return;
    }
    pthread_mutex_lock(&pool.lock);
    pool.job.fn = fn;
    pool.job.ctx = ctx;
    pool.job.n_tasks = n_tasks;
    pool.job.max_workers = max_workers;
    atomic_store(&pool.job.next, 0);
    pool.open = true;
    pool.generation++;
    atomic_store_explicit(&pool.published, pool.generation, memory_order_release);
    pthread_cond_broadcast(&pool.start);
    pthread_mutex_unlock(&pool.lock);

    run_tasks(&pool.job, 0);

    /* No task is left to take: only those taken by workers that joined can be running. */
    pthread_mutex_lock(&pool.lock);
    pool.open = false;
    if (pool.running > 0) {
        /* They are about to finish, as a rule: spin a little before sleeping on done. */
        pthread_mutex_unlock(&pool.lock);
        spin_while(workers_running, 0);
        pthread_mutex_lock(&pool.lock);
    }
    while (pool.running > 0)
        pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    pthread_mutex_unlock(&pool.busy);
}

/* A range job as the tasks of a parallel job: task t is piece t. */
struct range_job {
    tide__cpu_range_fn fn;
    const void *ctx;
    int64_t n, grain;
};

static void range_task(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const struct range_job *job = ctx;
    int64_t begin = task * job->grain;
    int64_t end = job->n - begin > job->grain ? begin + job->grain : job->n;
    job->fn(job->ctx, begin, end);
}

void tide__cpu_parallel_for(int64_t n, int64_t grain, tide__cpu_range_fn fn, const void *ctx)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    if (n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    struct range_job job = {.fn = fn, .ctx = ctx, .n = n, .grain = grain};
    tide__cpu_parallel((n - 1) / grain + 1, tide__cpu_workers(), range_task, &job);
}

void tide_cpu_kernels_set_threads(int threads)
{
    tide__cpu_blas_init();
    int total = threads > 0 ? threads : startup_threads;
    if (total > MAX_THREADS)
        total = MAX_THREADS;

    pthread_mutex_lock(&pool.busy);
    pthread_mutex_lock(&pool.lock);
    pool.stopping = true;
    pthread_cond_broadcast(&pool.start);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < atomic_load(&pool.n_threads); i++)
        pthread_join(pool.threads[i], NULL);

    pthread_mutex_lock(&pool.lock);
    pool.stopping = false;
    atomic_store(&pool.n_threads, 0);
    pool.first_generation = pool.generation;
    pthread_mutex_unlock(&pool.lock);
    /* If a thread cannot be started, the pool runs with those that could. */
    for (int i = 0; i < total - 1; i++) {
        if (pthread_create(&pool.threads[i], NULL, worker_main, (void *)(intptr_t)(i + 1)) != 0)
            break;
        atomic_fetch_add(&pool.n_threads, 1);
    }
    pthread_mutex_unlock(&pool.busy);
}
