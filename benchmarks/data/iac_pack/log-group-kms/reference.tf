resource "aws_kms_key" "logs" {
  description             = "Key for audit logs"
  deletion_window_in_days = 10
}

resource "aws_cloudwatch_log_group" "audit" {
  name              = "app-audit"
  retention_in_days = 30
  kms_key_id        = aws_kms_key.logs.arn
}
