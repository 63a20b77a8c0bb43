provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "db" {
  name     = "rg-db"
  location = "westeurope"
}

resource "azurerm_postgresql_flexible_server" "main" {
  name                   = "pg-main-prod"
  resource_group_name    = azurerm_resource_group.db.name
  location               = azurerm_resource_group.db.location
  version                = "16"
  administrator_login    = "pgadmin"
  administrator_password = "not-a-real-password-1!"
  storage_mb             = 32768
  sku_name               = "GP_Standard_D2s_v3"
  backup_retention_days  = 14

  high_availability {
    mode = "ZoneRedundant"
  }
}

resource "azurerm_postgresql_flexible_server_database" "app" {
  name      = "app"
  server_id = azurerm_postgresql_flexible_server.main.id
  charset   = "UTF8"
  collation = "en_US.utf8"
}
