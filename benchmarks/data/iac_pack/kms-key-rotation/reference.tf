resource "aws_kms_key" "main" {
  description             = "Application data key"
  enable_key_rotation     = true
  deletion_window_in_days = 14
}
