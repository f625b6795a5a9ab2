// The answers of GET /api/v1/databases/{id}/custom-metrics and .../custom-metrics/{name}
// (src/server/routes/custom-metrics.ts): the operator's own SQL checks from the agent config, with
// their latest values, and one metric's series per value column and label set over a window.
import { t } from 'elysia'
import { Nullable, Timestamp } from './common.ts'

const Labels = t.Record(t.String(), t.String(), {
  description: "the row's label columns as text (at most 200 characters each)",
})

export const CustomMetricAlertView = t.Object(
  {
    op: t.Union([t.Literal('above'), t.Literal('below')]),
    threshold: t.Number(),
    for_seconds: t.Integer({ description: 'every sample of this long a window must cross the threshold' }),
    severity: t.Union([t.Literal('warning'), t.Literal('critical')]),
  },
  { title: 'CustomMetricAlert' },
)

export const CustomMetricLatest = t.Object(
  {
    column: t.String({ description: 'the value column' }),
    labels: Labels,
    value: Nullable(
      t.Number({
        description:
          "a gauge's value as the query returned it; a counter's rate per second (null until it was read twice)",
      }),
    ),
    raw_value: Nullable(t.Number({ description: 'the last reading as the query returned it' })),
    ts: Nullable(Timestamp('when the value was collected')),
  },
  { title: 'CustomMetricLatest' },
)

export const CustomMetricView = t.Object(
  {
    name: t.String(),
    kind: t.Union([t.Literal('gauge'), t.Literal('counter')]),
    labels: t.Array(t.String()),
    values: t.Array(t.String()),
    interval_seconds: t.Integer(),
    description: Nullable(t.String()),
    alert: Nullable(CustomMetricAlertView),
    last_error: Nullable(t.String({ description: "the query's latest error, while it fails" })),
    last_error_at: Nullable(Timestamp()),
    error_count: t.Integer({ description: 'errors reported for this metric since it was defined' }),
    updated_at: Timestamp('when an agent last sent its definition'),
    latest: t.Array(CustomMetricLatest),
  },
  { title: 'CustomMetric' },
)

export const CustomMetricList = t.Object({ metrics: t.Array(CustomMetricView) }, { title: 'CustomMetricList' })

export const CustomMetricSeries = t.Object(
  {
    name: t.String(),
    kind: t.Union([t.Literal('gauge'), t.Literal('counter')]),
    unit: Nullable(t.Literal('per_second', { description: "counters' values are rates per second" })),
    since: Timestamp(),
    until: Timestamp(),
    bucket_seconds: t.Integer(),
    series: t.Array(
      t.Object({
        column: t.String(),
        labels: Labels,
        points: t.Array(
          t.Object({
            ts: Timestamp('start of the interval'),
            value: t.Number({ description: "the interval's latest value" }),
          }),
        ),
      }),
    ),
  },
  { title: 'CustomMetricSeries' },
)
