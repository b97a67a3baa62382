"""The weekly literature refresh: online sources (Semantic Scholar, OpenAlex) answer from an
on-disk cache so a re-run asks nothing again; once a week the schedule drops cached answers
older than `max_age_days`, so the next rounds of active topics see newly published papers.
Local dumps need no refresh: their index is rebuilt when the file changes."""
import dagster as dg

from resources.literature import Literature


class RefreshConfig(dg.Config):
    max_age_days: float = 7.0


@dg.op(description="Delete cached literature API answers older than max_age_days.")
def expire_literature_cache(context: dg.OpExecutionContext, config: RefreshConfig, literature: Literature) -> int:
    root = literature.http_cache_root()
    gone = literature.expire_http_cache(config.max_age_days * 86400)
    context.log.info(f"dropped {gone} cached answers older than {config.max_age_days:g} days from {root}")
    return gone


@dg.job(description="Refresh the literature of active topics: expire cached online search answers.")
def refresh_literature():
    expire_literature_cache()


literature_refresh_schedule = dg.ScheduleDefinition(
    name="weekly_literature_refresh", job=refresh_literature, cron_schedule="0 3 * * 1",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Mondays 03:00: expire week-old literature API answers so new papers reach the next rounds.")
