resource "aws_kms_key" "main" {
  description             = "Application data key"
  deletion_window_in_days = 14
}
